"""`[conformance.replay]` resolved into a typed `ReplayConfig`: which schedulers to replay,
with which settings and cost model, every default written out."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from vllm_plugin_release.buildspec.model import Spec, integer, number, string, table
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.replay.mix import Origin, check_table, spec_origin
from vllm_plugin_release.replay.model import (
    CostModel,
    fit_cost_model,
    read_calibration,
)

UPSTREAM_SCHEDULER = "vllm.v1.core.sched.scheduler:Scheduler"

# The scheduler a policy name implies when `plugin_scheduler` is not given.
POLICY_SCHEDULERS = {
    "reference": "vllm_reference_plugin.scheduler:ReferenceScheduler",
    "tt": "vllm_tt_plugin.scheduler:TTScheduler",
}

# Illustrative step costs (seconds): fixed, per prefill token, per decode request.
# Calibrate them from hardware (`cost_model = {calibration = "steps.csv"}`).
DEFAULT_COST = {"a": 0.004, "b": 0.00005, "c": 0.0002}

_SCHED_CLASS = r"^[A-Za-z_][\w.]*[:.][A-Za-z_][\w.]*$"

REPLAY_SCHEMA = table(
    "CPU scheduler replay: the plugin's real scheduler against upstream vLLM's "
    "V1 scheduler on the request mix, with no model.",
    {
        "plugin_scheduler": string(
            "The plugin's scheduler class, module:Class (e.g. "
            "vllm_tt_plugin.scheduler:TTScheduler); default from `policy`.",
            pattern=_SCHED_CLASS,
        ),
        "upstream_scheduler": string(
            f"Upstream scheduler class (default {UPSTREAM_SCHEDULER}).", pattern=_SCHED_CLASS
        ),
        "policy": string(
            "The plugin's configuration policy, applied to the plugin side as "
            'its platform would: "tt", "reference", "none", "module:function" '
            "(function(scheduler_config, model_config) -> list of reasons), or "
            '"platform:module:Class": the plugin\'s own Platform class, whose '
            "check_and_update_config(vllm_config) hook runs on the built config as vLLM "
            "runs it. Default none."
        ),
        "model_type": string(
            "HF model_type the policy decides for (e.g. llama, gemma4); default llama."
        ),
        "max_model_len": integer(
            "Maximum model length (default 4096); longer prompts are rejected.", minimum=16
        ),
        "max_num_seqs": integer("Default 32.", minimum=1),
        "max_num_batched_tokens": integer("Token budget per step (default 2048).", minimum=1),
        "block_size": integer("KV block size (16).", minimum=1),
        "num_gpu_blocks": integer(
            "KV blocks (default: max_num_seqs full-length sequences + 1).", minimum=1
        ),
        "enable_chunked_prefill": {
            "type": "boolean",
            "description": "Chunked prefill as configured by the user (default true); the "
            "plugin's policy may turn it off on the plugin side.",
        },
        "long_prefill_token_threshold": integer(
            "vLLM's long-prefill cap (default 0 = none).", minimum=0
        ),
        "enable_prefix_caching": {
            "type": "boolean",
            "description": "Prefix caching (default false: every prompt is distinct).",
        },
        "cost_model": table(
            "Per-step cost t_step = a + b*prefill_tokens + c*decode_requests "
            "(seconds), or {calibration = FILE}: a CSV of measured steps with columns "
            "prefill_tokens,decode_requests,seconds, fitted by least squares.",
            {
                "a": number("Seconds per step.", minimum=0),
                "b": number("Seconds per prefill token.", minimum=0),
                "c": number("Seconds per decode request.", minimum=0),
                "calibration": string(
                    "CSV of measured steps; a `path:NAME` column (requests on "
                    "slow path NAME in the step) fits that path's term too."
                ),
                "paths": {
                    "type": "object",
                    "description": "Seconds per request that takes a slow path "
                    "([conformance.workload] slow_paths NAME) in a step, added to the step's "
                    "time on the plugin side; 0 (not calibrated) until measured on the hardware "
                    "runner.",
                    "additionalProperties": {"type": "number", "minimum": 0},
                },
            },
        ),
        "max_steps": integer(
            "Stop a replay after this many steps (default: from the mix).", minimum=1
        ),
        "timeout_s": number("Wall-time bound per scheduler (default 600).", exclusiveMinimum=0),
    },
)


@dataclass(frozen=True)
class ReplayConfig:
    plugin_scheduler: str
    upstream_scheduler: str
    policy: str
    model_type: str
    max_model_len: int
    settings: dict[str, Any]
    cost: CostModel
    max_steps: int | None = None
    timeout_s: float = 600.0
    # The slower paths a request may take on the plugin side ([conformance.workload]
    # slow_paths: name, predicate, args, ...): the replay marks those requests.
    slow_paths: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = {
            "plugin_scheduler": self.plugin_scheduler,
            "upstream_scheduler": self.upstream_scheduler,
            "policy": self.policy,
            "model_type": self.model_type,
            "max_model_len": self.max_model_len,
            "settings": dict(self.settings),
            "cost_model": self.cost.to_json(),
        }
        if self.slow_paths:
            out["slow_paths"] = [dict(p) for p in self.slow_paths]
        return out


def resolve(
    table: dict[str, Any],
    root: Path,
    origin: Origin | str = "buildspec",
    *,
    validated: bool = False,
) -> ReplayConfig:
    """`[conformance.replay]` with every default filled in (checked unless `validated`)."""
    if isinstance(origin, str):
        origin = Origin(origin, None, ("conformance", "replay"))
    if not validated:
        title = "invalid replay settings"
        check_table(REPLAY_SCHEMA, table, origin, title, pattern_message="is not 'module:Class'")
    policy = str(table.get("policy", "none"))
    if policy not in ("none", "tt", "reference") and ":" not in policy:
        raise BadInput(
            f"{origin.where('policy')}: {policy!r} is not a policy",
            hint='use "tt", "reference", "none", "module:function" or "platform:module:Class"',
        )
    plugin = table.get("plugin_scheduler") or POLICY_SCHEDULERS.get(policy)
    if not plugin:
        raise BadInput(
            f"{origin.where('plugin_scheduler')}: missing",
            hint='name the plugin\'s scheduler class, e.g. "vllm_tt_plugin.scheduler:TTScheduler"',
        )
    max_model_len = int(table.get("max_model_len", 4096))
    settings = _settings(table, max_model_len, origin)
    cost = _cost(table.get("cost_model", {}), root, origin)
    return ReplayConfig(
        plugin_scheduler=str(plugin).strip(),
        upstream_scheduler=str(table.get("upstream_scheduler", UPSTREAM_SCHEDULER)),
        policy=policy,
        model_type=str(table.get("model_type", "llama")),
        max_model_len=max_model_len,
        settings=settings,
        cost=cost,
        max_steps=table.get("max_steps"),
        timeout_s=float(table.get("timeout_s", 600.0)),
    )


def _settings(table: dict[str, Any], max_model_len: int, origin: Origin) -> dict[str, Any]:
    """The scheduler settings, defaults filled in; BadInput for those vLLM refuses."""
    max_num_seqs = int(table.get("max_num_seqs", 32))
    block_size = int(table.get("block_size", 16))
    blocks = table.get("num_gpu_blocks") or max_num_seqs * math.ceil(max_model_len / block_size) + 1
    settings = {
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": int(table.get("max_num_batched_tokens", 2048)),
        "block_size": block_size,
        "num_gpu_blocks": int(blocks),
        "enable_chunked_prefill": bool(table.get("enable_chunked_prefill", True)),
        "long_prefill_token_threshold": int(table.get("long_prefill_token_threshold", 0)),
        "enable_prefix_caching": bool(table.get("enable_prefix_caching", False)),
    }
    budget = settings["max_num_batched_tokens"]
    if budget < max_num_seqs:
        raise BadInput(
            f"{origin.where('max_num_batched_tokens')}: {budget} is "
            f"below max_num_seqs {max_num_seqs}; vLLM refuses that",
        )
    if not settings["enable_chunked_prefill"] and budget < max_model_len:
        raise BadInput(
            f"{origin.where('max_num_batched_tokens')}: with enable_chunked_prefill = false the "
            f"budget ({budget}) must be >= max_model_len "
            f"({max_model_len}); vLLM refuses otherwise",
        )
    if settings["num_gpu_blocks"] * block_size < max_model_len:
        raise BadInput(
            f"{origin.where('num_gpu_blocks')}: {settings['num_gpu_blocks']} blocks of "
            f"{block_size} tokens cannot hold one max_model_len ({max_model_len}) sequence; "
            "vLLM refuses to start with that",
        )
    return settings


def _cost(table: dict[str, Any], root: Path, origin: Origin) -> CostModel:
    paths = {str(k): float(v) for k, v in (table.get("paths") or {}).items()}
    if "calibration" in table:
        if any(k in table for k in "abc"):
            raise BadInput(
                f"{origin.where('cost_model')}: give either a, b, c or calibration, not both"
            )
        path = Path(table["calibration"])
        path = path if path.is_absolute() else root / path
        rows, names = read_calibration(path)
        fitted = fit_cost_model(rows, source=f"fitted from {table['calibration']}", paths=names)
        return replace(fitted, paths={**paths, **fitted.paths})
    if not (table.keys() - {"paths"}):
        return CostModel(**DEFAULT_COST, paths=paths)
    missing = [k for k in "abc" if k not in table]
    if missing:
        raise BadInput(
            f"{origin.where('cost_model')}: missing {', '.join(missing)}",
            hint="give all of a (s/step), b (s/prefill token), c (s/decode request)",
        )
    return CostModel(*(float(table[k]) for k in "abc"), source="spec", paths=paths)


def configured(spec: Spec) -> bool:
    """Whether the spec asks for a scheduler replay (a `[conformance.replay]` with keys)."""
    return bool(spec.conformance("replay"))


class DeclaredModel(NamedTuple):
    """The model `[conformance.replay]` declares (4096 and llama by default)."""

    max_model_len: int
    model_type: str


def declared_model(spec: Spec) -> DeclaredModel:
    table = spec.conformance("replay") or {}
    return DeclaredModel(
        int(table.get("max_model_len", 4096)), str(table.get("model_type", "llama"))
    )


def from_spec(spec: Spec) -> ReplayConfig:
    table = spec.conformance("replay")
    if table is None:
        raise BadInput(
            f"{spec.path}: no [conformance.replay] table",
            hint='add one with at least plugin_scheduler = "module:Class" (or policy)',
        )
    config = resolve(table, spec.root, spec_origin(spec, ("conformance", "replay")), validated=True)
    return with_slow_paths(config, (spec.conformance("workload") or {}).get("slow_paths") or [])


def with_slow_paths(config: ReplayConfig, slow_paths: list[dict[str, Any]]) -> ReplayConfig:
    """`config` with the spec's slow paths, priced by the cost model (0: not calibrated)."""
    if not slow_paths:
        return config
    paths = config.cost.paths
    cost = replace(
        config.cost, paths={**paths, **{p["name"]: paths.get(p["name"], 0.0) for p in slow_paths}}
    )
    return replace(config, cost=cost, slow_paths=tuple(dict(p) for p in slow_paths))
