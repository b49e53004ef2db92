"""``python -m unbroken.frontend.graph_breaks --markdown`` (``make docs``): the graph-break
catalogue, which lives with the error types in :mod:`unbroken.symbolic.diagnostics.catalogue`.
Only this command line is kept here; code imports the catalogue from there."""
from ..symbolic.diagnostics.catalogue import main

if __name__ == "__main__":  # pragma: no cover - exercised through `make docs`
    main()
