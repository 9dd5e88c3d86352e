"""pytest plugin for the conformance suite (in progress)."""
