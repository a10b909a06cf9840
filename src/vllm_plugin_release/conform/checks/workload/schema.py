"""The tables of the `workload` check: its own and the request mix whose features it asks about."""

from __future__ import annotations

from typing import Any

from vllm_plugin_release.conform.lib.hardwaresettings import DOCS_DEFAULT
from vllm_plugin_release.replay import features as feat
from vllm_plugin_release.replay.mix import REQUEST_MIX_SCHEMA

WORKLOAD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "How the `workload` check asks the plugin about the request mix's "
    "features: the plugin's slower paths (vendor policy, as data) and the model it is asked "
    "for. The features themselves are [conformance.request_mix] features.",
    "additionalProperties": False,
    "properties": {
        "slow_paths": {
            "type": "array",
            "description": "The plugin's slower paths, each decided per request by a function "
            "of the plugin: predicate(sampling_params, **args) -> True when the request takes "
            "it. The replay marks those requests and prices them ([conformance.replay] "
            "cost_model.paths).",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "predicate"],
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The path's name (e.g. host sampler).",
                    },
                    "instead_of": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The path a request takes otherwise (e.g. device sampler).",
                    },
                    "predicate": {
                        "type": "string",
                        "pattern": r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$",
                        "description": "module:attr of the plugin's function (a static method "
                        "too: module:Class.method).",
                    },
                    "args": {
                        "type": "object",
                        "description": "Keyword arguments the predicate is called with.",
                    },
                    "engine_features": {
                        "type": "array",
                        "items": {"enum": list(feat.FEATURE_KEYS)},
                        "description": "Engine-level features that put every request on this "
                        "path when the plan uses them (the spec's statement of the plugin's "
                        "code; not asked of the plugin).",
                    },
                },
            },
        },
        "architecture": {
            "type": "string",
            "minLength": 1,
            "default": "LlamaForCausalLM",
            "description": "The HF architecture of the small local model config the engine "
            "is built for (no weights).",
        },
        "model_type": {
            "type": "string",
            "minLength": 1,
            "description": "Its HF model_type (default: [conformance.replay] model_type, "
            "else llama).",
        },
        "max_model_len": {
            "type": "integer",
            "minimum": 16,
            "description": "Default: [conformance.replay] max_model_len, else 4096.",
        },
        "model": {
            "type": "string",
            "minLength": 1,
            "description": "The model looked up in the plugin's docs (default: "
            "[conformance.hardware] model).",
        },
        "model_docs": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "pattern": r"^(?!/)(?!.*\.\.)"},
            "default": list(DOCS_DEFAULT),
            "description": "Globs (relative to the plugin's root) of the docs that show the "
            "models the plugin serves.",
        },
    },
}

# The `[conformance.*]` tables the check reads, with their schemas.
TABLES: dict[str, dict[str, Any]] = {"request_mix": REQUEST_MIX_SCHEMA, "workload": WORKLOAD_SCHEMA}
