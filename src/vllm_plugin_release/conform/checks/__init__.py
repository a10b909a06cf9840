"""One folder per conformance check: `check.py` (the run), `schema.py` (its
`[conformance.*]` tables), `evidence.py` where it renders evidence of its own, and an
`__init__.py` exporting the `CheckDef` (`CHECK`) that `conform/registry.py` lists."""
