"""The tables of the `scheduler` check: its own, and the request mix and replay it replays."""

from __future__ import annotations

from typing import Any

from vllm_plugin_release.replay.config import REPLAY_SCHEMA
from vllm_plugin_release.replay.mix import REQUEST_MIX_SCHEMA

DEFAULT_DOCS = "docs/SCHEDULING.md"


SCHEDULER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Scheduler constraints check (docs half; the replay half compares).",
    "additionalProperties": False,
    "properties": {
        "docs": {
            "type": "string",
            "minLength": 1,
            "default": DEFAULT_DOCS,
            "description": "The plugin's scheduling notes (Markdown), relative to the plugin "
            "source.",
        },
        "require_mixed_statement": {
            "type": "boolean",
            "default": True,
            "description": "Fail when the docs state nothing about mixed prefill+decode batches.",
        },
        "aliases": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "description": "Names the docs use for the plugin (e.g. TT); default: the words of "
            "[plugin] name other than vllm/plugin.",
        },
        "unobserved_support": {
            "enum": ["ignore", "warn", "fail"],
            "default": "warn",
            "description": "Verdict when the docs say a behaviour is supported but the replay "
            "never shows it on a load where upstream vLLM does.",
        },
    },
}

# The `[conformance.*]` tables the check reads, with their schemas.
TABLES: dict[str, dict[str, Any]] = {
    "scheduler": SCHEDULER_SCHEMA,
    "request_mix": REQUEST_MIX_SCHEMA,
    "replay": REPLAY_SCHEMA,
}
