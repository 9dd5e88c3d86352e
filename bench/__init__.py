"""workmem benchmark harness: ``python -m bench --help``."""
