"""Analysis shared by the conformance checks (and by the commands that run it alone)."""
