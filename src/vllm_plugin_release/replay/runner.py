"""Run a replay: the request goes to the pairing environment, which only drives schedulers;
mix, metrics, report and plots stay on this side."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from vllm_plugin_release.core import records
from vllm_plugin_release.replay.answer import ReplayAnswer, parse_answer
from vllm_plugin_release.replay.config import ReplayConfig
from vllm_plugin_release.replay.mix import RequestMix
from vllm_plugin_release.replay.model import Analysis, build_report, timing_report


@dataclass
class ReplayOutcome:
    report: dict[str, Any]
    timing: dict[str, Any]
    analyses: dict[str, Analysis]
    files: list[Path] = field(default_factory=list)


def build_request(
    mix: RequestMix, config: ReplayConfig, *, sys_path: Sequence[str | Path] = ()
) -> dict[str, Any]:
    """The JSON request the in-environment part reads."""
    cost = config.cost
    return {
        "model": {"max_model_len": config.max_model_len, "model_type": config.model_type},
        "requests": {
            "arrival": list(mix.arrival),
            "prompt": list(mix.prompt),
            "output": list(mix.output),
        },
        "cost_model": {"a": cost.a, "b": cost.b, "c": cost.c},
        "schedulers": [
            {
                "label": "plugin",
                "cls": config.plugin_scheduler,
                "policy": config.policy,
                "settings": dict(config.settings),
                "slow_path_cost": True,  # the slow paths are the plugin's
            },
            {
                "label": "upstream",
                "cls": config.upstream_scheduler,
                "policy": "none",
                "settings": dict(config.settings),
            },
        ],
        "limits": {"max_steps": config.max_steps, "timeout_s": config.timeout_s},
        "sys_path": [str(p) for p in sys_path],
        **({"paths": paths} if (paths := paths_request(mix, config)) else {}),
    }


def paths_request(mix: RequestMix, config: ReplayConfig) -> dict[str, Any] | None:
    """What the in-environment part needs to mark each request's slow path: the distinct
    combinations of the mix's features (as SamplingParams keyword arguments), each
    request's combination, the spec's slow paths and their price (None: nothing to mark)."""
    if mix.features is None or not config.slow_paths:
        return None
    from vllm_plugin_release.replay.features import combined_params

    variants = mix.features.variants
    used = {v.key for v in variants if v.needed}
    combos, of_request = mix.features.combos()
    return {
        "combos": [combined_params([variants[i] for i in combo]) for combo in combos],
        "request_combo": of_request,
        "slow_paths": [
            {
                "name": p["name"],
                "predicate": p["predicate"],
                "args": dict(p.get("args") or {}),
                # an engine-level feature the plan uses puts every request on the path
                "everyone": bool(used & set(p.get("engine_features") or ())),
            }
            for p in config.slow_paths
        ],
        "cost": dict(config.cost.paths),
    }


@dataclass(frozen=True)
class ReplayJob:
    """The request of inenv/replay.py: `mix` through the plugin's scheduler and upstream's."""

    mix: RequestMix
    config: ReplayConfig
    sys_path: tuple[str, ...] = ()
    side_by_side: bool = False

    module: ClassVar[str] = "replay"
    LABELS: ClassVar[tuple[str, ...]] = ("plugin", "upstream")  # build_request's schedulers

    def to_json(self) -> dict[str, Any]:
        request = build_request(self.mix, self.config, sys_path=self.sys_path)
        return {**request, "side_by_side": self.side_by_side}

    def parse_answer(self, answer: Any) -> ReplayAnswer:
        return parse_answer(answer, self.LABELS, len(self.mix))


def run_raw(
    python: Path | str,
    mix: RequestMix,
    config: ReplayConfig,
    *,
    sys_path: Sequence[str | Path] = (),
) -> ReplayAnswer:
    """The in-environment answer for `mix` through both schedulers."""
    job = ReplayJob(mix, config, tuple(str(p) for p in sys_path))
    return side_by_side(python, job)


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def side_by_side(python: Path | str, job: ReplayJob) -> ReplayAnswer:
    """The replay of the job's schedulers, in the request's order: one in-env run importing
    vLLM once, each scheduler in its own forked child when there are two cores or more."""
    from vllm_plugin_release.edges.envrun import run_in_env

    count = len(job.LABELS)
    together = count > 1 and _cores() > 1
    # The replays plus vLLM's import; the per-scheduler bound is enforced inside.
    timeout = (1 if together else count) * job.config.timeout_s + 300
    return run_in_env(python, dataclasses.replace(job, side_by_side=together), timeout=timeout)


@dataclass(frozen=True)
class Output:
    """Where a replay's files go (`write`): the report, its timing and (`plots`) the plots."""

    out_dir: Path
    plots: bool = True


def replay(
    python: Path | str,
    mix: RequestMix,
    config: ReplayConfig,
    *,
    name: str,
    out: Output | None = None,
    sys_path: Sequence[str | Path] = (),
) -> ReplayOutcome:
    """Replay `mix`, build the report and (when `out` is given) write its files."""
    if out is not None and out.plots:  # matplotlib loads while the replay runs in the env
        import threading

        from vllm_plugin_release.replay.plots import pyplot

        threading.Thread(target=pyplot, name="vpr-pyplot", daemon=True).start()
    raw = run_raw(python, mix, config, sys_path=sys_path)
    report, analyses = build_report(raw, mix, name=name, replay_config=config.to_json())
    timing = timing_report(raw)
    outcome = ReplayOutcome(report, timing, analyses)
    if out is not None:
        outcome.files = write(outcome, out.out_dir, plots=out.plots)
    return outcome


def write(outcome: ReplayOutcome, out_dir: Path, *, plots: bool = True) -> list[Path]:
    from vllm_plugin_release.core.cache import atomic_write_text

    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    if plots:
        from vllm_plugin_release.replay.plots import caption, draw

        files.extend(draw(outcome.analyses, out_dir, title=caption(outcome.report)))
        outcome.report["plots"] = [p.name for p in files]
    report_path = out_dir / records.REPLAY
    atomic_write_text(report_path, json.dumps(outcome.report, indent=2, sort_keys=True) + "\n")
    timing_path = out_dir / records.REPLAY_TIMING
    atomic_write_text(timing_path, json.dumps(outcome.timing, indent=2, sort_keys=True) + "\n")
    return [report_path, timing_path, *files]


def env_python(dist_dir: Path, spec_path: Path) -> Path:
    """The pairing environment's python, from dist/NAME/env.json (written by `vpr env`)."""
    return records.env_record(dist_dir, spec_path).python
