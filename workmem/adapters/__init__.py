"""Built-in adapters. Each module imports its driver only when an adapter is opened."""
