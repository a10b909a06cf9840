"""The `[conformance.isolation]` table of the `isolation` check (`check.validate_config`)."""

from __future__ import annotations

from typing import Any

from vllm_plugin_release.conform.lib.symbols import SYMBOL_RE

# JSON Schema (draft 2020-12) of `[conformance.isolation]`, for spec_schema.py.
ISOLATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Core isolation: vendor symbols that must be absent from vLLM core "
    "(source tree and wheel).",
    "additionalProperties": False,
    "required": ["symbols"],
    "properties": {
        "symbols": {
            "type": "array",
            "description": "Vendor symbols, matched case-insensitively on identifier "
            "boundaries (`ttnn`, `tt_metal`, `TTPlatform`); ALL_CAPS names with "
            "underscores (`MESH_DEVICE`) match the whole token only.",
            "minItems": 1,
            "items": {
                "type": "string",
                "pattern": SYMBOL_RE.pattern,
                "description": "Letters, digits and `_ . - /`, at most 5 words.",
            },
        },
        "allowlist": {
            "type": "array",
            "description": "Known hits downgraded to info, each with its reason.",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["path", "symbol", "reason"],
                "properties": {
                    "path": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Path in the core tree or wheel (posix, glob "
                        "allowed), e.g. vllm/platforms/__init__.py.",
                    },
                    "symbol": {
                        "type": "string",
                        "minLength": 1,
                        "description": "One of `symbols`, or `*` for any.",
                    },
                    "reason": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Why this hit is acceptable.",
                    },
                },
            },
        },
    },
}

# The `[conformance.*]` tables the check reads, with their schemas.
TABLES: dict[str, dict[str, Any]] = {"isolation": ISOLATION_SCHEMA}
