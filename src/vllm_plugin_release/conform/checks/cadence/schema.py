"""The `[conformance.cadence]` table of the `cadence` check."""

from __future__ import annotations

from typing import Any

DEFAULT_TAG_PATTERN = (
    r"(?i)vllm[-_/]?v?(?P<core>\d+\.\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?)"
)


CADENCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Upstream cadence check: how far the plugin trails vLLM core releases.",
    "additionalProperties": False,
    "properties": {
        "max_minor_lag": {
            "type": "integer",
            "minimum": 0,
            "default": 1,
            "description": "Most minor release series (major.minor) the plugin may trail the "
            "latest core release by.",
        },
        "max_days_lag": {
            "type": "integer",
            "minimum": 0,
            "description": "Most days since the first core release the plugin has not adopted "
            "(unset: no limit).",
        },
        "on_violation": {
            "enum": ["fail", "warn"],
            "default": "fail",
            "description": "Status when the lag exceeds the policy: fail (gates the pairing) or "
            "warn (reported, for a pairing that deliberately stays on a pinned core).",
        },
        "include_prereleases": {
            "type": "boolean",
            "default": False,
            "description": "Count core pre-releases (rc, beta, dev) as releases; by default "
            "they are reported separately.",
        },
        "core_from": {
            "enum": ["index", "git"],
            "default": "index",
            "description": '"index": core releases from the package index (simple API); '
            '"git": from the tags of core_repo.',
        },
        "core_index": {
            "type": "string",
            "description": "Simple-API index for core releases; default: the [core.source] "
            "index, else https://pypi.org/simple.",
        },
        "core_repo": {
            "type": "string",
            "description": "Core git repository (path or URL) for core_from = git; default: "
            "the [core.source] url when it is a git source.",
        },
        "tag_pattern": {
            "type": "string",
            "description": "Regular expression with a named group `core` that finds the core "
            "version in a plugin tag name (default matches compat/vllm-0.24.0, vllm-v0.24.0, "
            "and a whole tag v0.24.0 or v0.24.0rc1, the vllm-project plugins' form, when "
            "that version is a core release).",
        },
    },
}

# The `[conformance.*]` tables the check reads, with their schemas.
TABLES: dict[str, dict[str, Any]] = {"cadence": CADENCE_SCHEMA}
