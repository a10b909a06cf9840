"""The `[conformance.api]` table of the `api` check."""

from __future__ import annotations

from typing import Any

from vllm_plugin_release.conform.lib.apicontract import DEFAULT_TASKS, DEFAULT_TIMEOUT
from vllm_plugin_release.conform.lib.apidiff import KINDS

DEFAULT_CONTRACT = "buildspec/contracts/vllm-0.25.1-openai.json"


API_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "API compatibility check (`api`): the pairing's OpenAPI surface against a "
    "stored client contract.",
    "additionalProperties": False,
    "properties": {
        "contract": {
            "type": "string",
            "description": "Client contract (JSON, written by `vpr api-contract`, or an OpenAPI "
            "document), relative to the repository root. Default: the newest "
            "buildspec/contracts/vllm-X.Y.Z-openai.json older than [core] version (else "
            f"{DEFAULT_CONTRACT}).",
        },
        "tasks": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "description": 'vLLM supported tasks the app is built for, e.g. ["generate"].',
            "default": list(DEFAULT_TASKS),
        },
        "endpoint_plugins": {
            "type": "boolean",
            "description": "Attach the installed `vllm.endpoint_plugins` entry points.",
            "default": True,
        },
        "platform_class": {
            "type": "string",
            "description": "The plugin's Platform class (package.module:Class); default: the "
            "one its `vllm.platform_plugins` entry point activates, else vLLM's CpuPlatform "
            "as a labelled stand-in.",
        },
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Seconds the in-env capture may take.",
            "default": DEFAULT_TIMEOUT,
        },
        "allow": {
            "type": "array",
            "description": "Known breaking changes accepted, each with a reason.",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["location", "reason"],
                "properties": {
                    "kind": {
                        "enum": sorted(KINDS),
                        "description": "Change kind (any if omitted).",
                    },
                    "location": {
                        "type": "string",
                        "description": "Change location; shell-style wildcards (*, ?) allowed.",
                    },
                    "reason": {"type": "string", "pattern": r"\S", "description": "Why."},
                },
            },
            "default": [],
        },
    },
}

# The `[conformance.*]` tables the check reads, with their schemas.
TABLES: dict[str, dict[str, Any]] = {"api": API_SCHEMA}
