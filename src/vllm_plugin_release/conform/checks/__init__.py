"""One module per conformance check: its `CheckDef` (`CHECK`, which `conform/registry.py`
lists), its `[conformance.*]` tables (`TABLES`), its run and the evidence it renders."""
