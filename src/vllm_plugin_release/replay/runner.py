"""Run a replay: the request goes to the pairing environment, which only drives schedulers;
mix, metrics, report and its PNG plots (matplotlib, imported when drawn) stay on this side."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from vllm_plugin_release.core import records
from vllm_plugin_release.replay.config import ReplayConfig
from vllm_plugin_release.replay.mix import RequestMix
from vllm_plugin_release.replay.model import (
    Analysis,
    ReplayAnswer,
    build_report,
    parse_answer,
    timing_report,
)


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
    from vllm_plugin_release.replay.mix import combined_params

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
    """The job's replay: vLLM imported once, each scheduler forked when there are two cores."""
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
        files.extend(draw(outcome.analyses, out_dir, title=caption(outcome.report)))
        outcome.report["plots"] = [p.name for p in files]
    report_path = out_dir / records.REPLAY
    atomic_write_text(report_path, json.dumps(outcome.report, indent=2, sort_keys=True) + "\n")
    timing_path = out_dir / records.REPLAY_TIMING
    atomic_write_text(timing_path, json.dumps(outcome.timing, indent=2, sort_keys=True) + "\n")
    return [report_path, timing_path, *files]


# The plots: step composition over time and the ITL distribution.
COLOURS = {"prefill": "#d95f02", "decode": "#1b9e77", "mixed": "#7570b3"}
LABELS = {"plugin": "plugin", "upstream": "upstream vLLM"}


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (the runner imports it ahead, in a thread)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def caption(report: dict[str, Any]) -> str:
    """What every plot's title names: the pairing and the cost model the replay assumed."""
    cost = (report.get("config") or {}).get("cost_model") or {}
    model = "cost model ?"
    if all(isinstance(cost.get(k), (int, float)) for k in "abc"):
        model = (
            f"cost model: step = {cost['a'] * 1000:g} ms + {cost['b'] * 1000:g} ms/prefill token"
            f" + {cost['c'] * 1000:g} ms/decode request ({cost.get('source', '?')})"
        )
    return f"{report.get('name', '?')}, vLLM {report.get('vllm_version') or '?'}; {model}"


def step_composition(
    analyses: dict[str, Analysis], path: Path, *, bins: int = 200, title: str = ""
) -> Path:
    """Tokens per second of simulated time, split prefill/decode, with mixed steps marked."""
    import numpy as np

    plt = pyplot()
    labels = [k for k in ("plugin", "upstream") if k in analyses]
    fig, axes = plt.subplots(len(labels), 1, figsize=(10, 3.2 * len(labels)), squeeze=False)
    horizon = max((float(a.step_end[-1]) for a in analyses.values() if len(a.step_end)), default=1)
    edges = np.linspace(0.0, horizon, bins + 1)
    width = edges[1] - edges[0]
    for ax, label in zip(axes[:, 0], labels):
        a = analyses[label]
        where = np.clip(np.searchsorted(edges, a.step_start, side="right") - 1, 0, bins - 1)
        pf, dec, mixed = (
            np.bincount(where, weights=w, minlength=bins)
            for w in (a.prefill_tokens, a.decode_tokens, a.mixed.astype(float))
        )
        pf, dec = pf / width, dec / width
        mid = edges[:-1] + width / 2
        for low, high, kind in ((0, pf, "prefill"), (pf, pf + dec, "decode")):
            style = {"color": COLOURS[kind], "alpha": 0.8, "label": f"{kind} tokens/s"}
            ax.fill_between(mid, low, high, step="mid", **style)
        if mixed.any():
            top = float((pf + dec).max()) or 1.0
            hit = mixed > 0
            ax.scatter(
                mid[hit],
                np.full(hit.sum(), top * 1.04),
                marker="|",
                s=30,
                color=COLOURS["mixed"],
                label="bin holds mixed steps",
            )
        n_mixed = int(a.mixed.sum())
        ax.set_title(f"{LABELS[label]}: {len(a.step_start)} steps, {n_mixed} mixed")
        ax.set_ylabel("tokens / s")
        ax.legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("simulated time (s)")
    return _save(plt, fig, path, title and f"Step composition: {title}")


def itl_distribution(analyses: dict[str, Analysis], path: Path, *, title: str = "") -> Path:
    """Histogram (log-spaced) and CDF of inter-token latency for both schedulers, in ms."""
    import numpy as np

    plt = pyplot()
    fig, (hist, cdf) = plt.subplots(1, 2, figsize=(11, 3.8))
    values = [a.itl * 1000 for a in analyses.values() if len(a.itl)]
    if values:
        low = max(min(float(v[v > 0].min()) if (v > 0).any() else 1e-3 for v in values), 1e-3)
        high = max(float(v.max()) for v in values)
        edges = np.geomspace(low, max(high, low * 1.01), 60)
    for label, colour in (("plugin", COLOURS["prefill"]), ("upstream", COLOURS["decode"])):
        a = analyses.get(label)
        if a is None or not len(a.itl):
            continue
        hist.hist(a.itl * 1000, bins=edges, alpha=0.55, color=colour, label=LABELS[label])
        ordered = np.sort(a.itl)
        cdf.plot(
            ordered * 1000,
            np.arange(1, len(ordered) + 1) / len(ordered),
            color=colour,
            label=f"{LABELS[label]} (p99 {np.percentile(ordered, 99) * 1000:.1f} ms)",
        )
    itl = "inter-token latency (ms)"
    hist.set(xscale="log", yscale="log", xlabel=itl, ylabel="tokens", title="ITL distribution")
    hist.legend(fontsize=8)
    cdf.set(xscale="log", xlabel=itl, ylabel="fraction of tokens", title="ITL CDF")
    cdf.legend(fontsize=8, loc="lower right")
    return _save(plt, fig, path, title and f"Inter-token latency: {title}")


def _save(plt: Any, fig: Any, path: Path, title: str) -> Path:
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def draw(analyses: dict[str, Analysis], folder: Path, *, title: str = "") -> list[Path]:
    """Both plots into `folder`, titled with `title` (see `caption`); returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    if not analyses:
        return []
    return [
        step_composition(analyses, folder / records.REPLAY_PLOTS[0], title=title),
        itl_distribution(analyses, folder / records.REPLAY_PLOTS[1], title=title),
    ]
