"""The `hardware` check reads `[conformance.hardware]` (its schema and settings are
`conform/lib/hardwaresettings.py`: the `hardware_docs` and `workload` checks read it too)."""

from __future__ import annotations

from typing import Any

from vllm_plugin_release.conform.lib.hardwaresettings import HARDWARE_SCHEMA

# The `[conformance.*]` tables the check reads, with their schemas.
TABLES: dict[str, dict[str, Any]] = {"hardware": HARDWARE_SCHEMA}
