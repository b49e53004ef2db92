"""Variable trackers: what each Python value is during tracing (see ``base.py``)."""
