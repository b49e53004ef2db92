"""The model zoo: small, seeded models that every stage of unbroken must export (see zoo.py)."""
