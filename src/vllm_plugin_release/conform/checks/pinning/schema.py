"""The `[conformance.pinning]` table of the `pinning` check."""

from __future__ import annotations

from typing import Any

LEVELS = ("ignore", "warn", "fail")


PINNING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Build pinning check: how the plugin's installer builds vLLM core.",
    "additionalProperties": False,
    "properties": {
        "files": {
            "type": "array",
            "description": "More installer inputs to read, relative to the plugin source: "
            'a path, or {path = "...", kind = "shell|dockerfile|requirements|pyproject"}. '
            "[plugin] installer and overrides are always read.",
            "items": {
                "oneOf": [
                    {"type": "string", "minLength": 1},
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["path"],
                        "properties": {
                            "path": {"type": "string", "minLength": 1},
                            "kind": {"enum": ["shell", "dockerfile", "requirements", "pyproject"]},
                        },
                    },
                ]
            },
        },
        "build_args": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "default": {},
            "description": "Build arguments the installer Dockerfile is read with (like "
            "`docker build --build-arg`): they replace ARG defaults, so the `if` branches "
            "they select are the ones followed.",
        },
        "unhashed_fetch": {
            "enum": list(LEVELS),
            "default": "warn",
            "description": "Verdict for an input downloaded at install time without a hash "
            "check (curl/wget without sha256sum -c, URL requirements, git refs that are "
            "not commits).",
        },
        "editable_install": {
            "enum": list(LEVELS),
            "default": "warn",
            "description": "Verdict for an editable install (-e).",
        },
        "unpinned": {
            "enum": list(LEVELS),
            "default": "warn",
            "description": "Verdict for a dependency without an exact pin (== or ===).",
        },
        "require_from_source": {
            "type": "boolean",
            "default": True,
            "description": "Fail unless the installer builds vLLM core from source "
            "(--no-binary vllm, an sdist or a git checkout).",
        },
    },
}

# The `[conformance.*]` tables the check reads, with their schemas.
TABLES: dict[str, dict[str, Any]] = {"pinning": PINNING_SCHEMA}
