"""``python -m unbroken ...``: the same as the ``unbroken`` command."""
import sys

from .cli import main

sys.exit(main())
