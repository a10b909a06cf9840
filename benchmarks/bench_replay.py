"""Issue 16 targets for the scheduler replay, on 10,000 requests (issue 5's were 1.25x
and 60 s):

- harness overhead: replay wall time (the loop around the schedulers, plus encoding
  the token timelines) <= 1.1x the time spent inside `schedule()` +
  `update_from_output()`;
- 10,000 requests through both schedulers (the reference plugin's and upstream
  vLLM's) in <= 20 s, counted as the whole in-environment run: vLLM import,
  scheduler construction, both replays (side by side, one per core) and the results'
  serialisation. Its floor is the slower scheduler's own time (printed as such).

The pairing env's python comes from the argument, else VPR_BENCH_VLLM_PYTHON /
VPR_TEST_VLLM_PYTHON, else dist/reference/env.json, else the bench makes the reference
pairing's env itself (`vpr build-core`, `build-plugin`, `env` into .vpr/bench/dist).

    python -m benchmarks.bench_replay [PYTHON] [REQUESTS]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

# A loaded pilot-like mix: arrivals faster than the device drains them, so batches fill.
BENCH_MIX: dict[str, Any] = {
    "seed": 5,
    "arrival": {"process": "poisson", "rate": 40.0},
    "prompt_tokens": {"dist": "lognormal", "median": 256, "sigma": 0.8, "max": 3000},
    "output_tokens": {"dist": "lognormal", "median": 64, "sigma": 0.8, "max": 1000},
}
BENCH_REPLAY: dict[str, Any] = {
    "plugin_scheduler": "vllm_reference_plugin.scheduler:ReferenceScheduler",
    "policy": "reference",
    "max_model_len": 4096,
    "max_num_seqs": 64,
    "max_num_batched_tokens": 2048,
    "cost_model": {"a": 0.004, "b": 0.00005, "c": 0.0002},
}
OVERHEAD_TARGET = 1.1
TOTAL_TARGET_S = 20.0


def run(python: Path, requests: int = 10000) -> dict[str, Any]:
    """Replay `requests` requests through both schedulers; return figures and verdicts."""
    from vllm_plugin_release.replay import config, mix, runner
    from vllm_plugin_release.replay.model import build_report, timing_report

    request_mix = mix.generate({**BENCH_MIX, "requests": requests}, REPO)
    replay_config = config.resolve(BENCH_REPLAY, REPO)
    start = time.perf_counter()
    raw = runner.run_raw(python, request_mix, replay_config)
    total = time.perf_counter() - start
    t0 = time.perf_counter()
    report, _ = build_report(raw, request_mix, name="bench", replay_config={})
    metrics_s = time.perf_counter() - t0
    timing = timing_report(raw)
    warm_s = _warm_total(python, request_mix, replay_config)
    return {
        "requests": requests,
        "steps": {side: report[side]["steps"] for side in ("plugin", "upstream")},
        "mixed_steps": {side: report[side]["mixed_steps"] for side in ("plugin", "upstream")},
        "scheduler_s": timing["scheduler_s"],
        # The least the replay can take with the two side by side: the slower scheduler's
        # own time in schedule() + update_from_output() (vLLM's code and the plugin's).
        "scheduler_floor_s": max(timing[side]["scheduler_s"] for side in ("plugin", "upstream")),
        "replay_wall_s": timing["replay_wall_s"],
        "overhead_ratio": timing["overhead_ratio"],
        "per_scheduler": {side: timing[side] for side in ("plugin", "upstream")},
        "import_s": round(timing["import_s"] or 0.0, 3),
        "total_s": round(total, 3),
        # The same run in the pairing env's warm worker, its imports already done (how
        # `vpr conform` runs it: the worker's imports overlap with the other checks).
        "warm_worker_total_s": round(warm_s, 3),
        "host_metrics_s": round(metrics_s, 3),
        "targets": {
            "overhead_ratio": {
                "target": OVERHEAD_TARGET,
                "met": (timing["overhead_ratio"] or 99) <= OVERHEAD_TARGET,
            },
            "total_s": {"target": TOTAL_TARGET_S, "met": total <= TOTAL_TARGET_S},
        },
    }


def _warm_total(python: Path, request_mix: Any, replay_config: Any) -> float:
    from vllm_plugin_release.edges import envrun
    from vllm_plugin_release.replay import runner

    with envrun.warm(python) as worker:
        if worker is None or not worker.wait_ready(600):
            raise SystemExit("bench_replay: the warm worker did not start")
        start = time.perf_counter()
        runner.run_raw(python, request_mix, replay_config)
        return time.perf_counter() - start


def _python() -> Path:
    for var in ("VPR_BENCH_VLLM_PYTHON", "VPR_TEST_VLLM_PYTHON"):
        if os.environ.get(var):
            return Path(os.environ[var])
    env_json = REPO / "dist" / "reference" / "env.json"
    if env_json.exists():
        return Path(json.loads(env_json.read_text())["python"])
    # None yet (a fresh clone): the reference pairing's env, made as `vpr env` makes it
    # (kept in .vpr: seconds once its wheels and environment are cached)
    from benchmarks.common import console, vpr

    console.print("bench_replay: making the reference pairing env (VPR_BENCH_VLLM_PYTHON unset)")
    dist = REPO / ".vpr" / "bench" / "dist"
    for stage in ("build-core", "build-plugin", "env"):
        vpr(stage, "--spec", str(REPO / "buildspec" / "reference.toml"), "--dist", str(dist))
    return Path(json.loads((dist / "reference" / "env.json").read_text())["python"])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = list(argv or [])
    python = Path(argv[0]) if argv else _python()
    requests = int(argv[1]) if len(argv) > 1 else 10000
    result = run(python, requests)
    verdict = "meets" if result["targets"]["total_s"]["met"] else "MISSES"
    print(
        f"replay of {result['requests']} requests through both schedulers: "
        f"{result['total_s']:.1f} s in all (vLLM import {result['import_s']:.1f} s; target "
        f"<= {TOTAL_TARGET_S:.0f} s: {verdict})"
    )
    print(
        f"  inside the schedulers {result['scheduler_s']:.2f} s, replay wall "
        f"{result['replay_wall_s']:.2f} s: overhead x{result['overhead_ratio']} (target <= "
        f"{OVERHEAD_TARGET}: "
        f"{'meets' if result['targets']['overhead_ratio']['met'] else 'MISSES'})"
    )
    print(
        f"  floor: the slower scheduler's own time {result['scheduler_floor_s']:.1f} s (the two "
        "run side by side, one per core; the time inside them is vLLM's and the plugin's code)"
    )
    print(
        f"  in the warm worker (imports done before, as in `vpr conform`): "
        f"{result['warm_worker_total_s']:.1f} s"
    )
    for side, figures in result["per_scheduler"].items():
        print(
            f"  {side}: {figures['steps']} steps, {figures['scheduler_s']:.2f} s in scheduler, "
            f"{figures['loop_wall_s']:.2f} s loop (x{figures['overhead_ratio']})"
        )
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
