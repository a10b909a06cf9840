"""The `[conformance.plugin_tests]` table of the `plugin_tests` check."""

from __future__ import annotations

from typing import Any

PLUGIN_TESTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The plugin's own test suite, run in the pairing environment.",
    "additionalProperties": False,
    "properties": {
        "cpu": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["tests"],
            "description": "Test paths (relative to the plugin source) run on the cpu runner.",
        },
        "hardware": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Test paths run on the hardware runner (default: the cpu paths).",
        },
        "ignore": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Paths never collected on the cpu runner (they need the runtime); "
            "reported as deferred.",
        },
        "timeout": {
            "type": "integer",
            "minimum": 1,
            "default": 1800,
            "description": "Seconds one pytest run may take.",
        },
        "absence_signatures": {
            "type": "array",
            "items": {"type": "string", "minLength": 3},
            "default": [],
            "description": "Text in a failure that means the vendor runtime is absent, "
            "besides `No module named '<runtime module>'` (e.g. the runtime's own "
            "exception name): such failures are deferred on the cpu runner.",
        },
        "scan_imports": {
            "type": "boolean",
            "default": True,
            "description": "On the cpu runner with the runtime absent, leave out (and defer) "
            "the test files that import the runtime at import time, found by reading them.",
        },
    },
}

# The `[conformance.*]` tables the check reads, with their schemas.
TABLES: dict[str, dict[str, Any]] = {"plugin_tests": PLUGIN_TESTS_SCHEMA}
