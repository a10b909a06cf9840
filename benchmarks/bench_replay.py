"""Targets for the scheduler replay, on 10,000 requests:

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

    python -m benchmarks.bench_replay [PYTHON] [--sizes 1000,3000,10000] [--repeats 3]

Every figure is the median of the repeats (default 3); at the largest size (the targets'
10,000) the cold runs and the warm worker's are interleaved; the cold run's CPU seconds
(the in-environment process and its forked children) are printed beside its wall time,
since on a shared machine the wall time moves with the load.

Growth: the cold run at each size (default 1,000, 3,000 and 10,000
requests) gives the total, the time inside
the schedulers and the overhead ratio; their growth exponents (log-log slope over the
requests) are printed. vLLM's import, the same at every size, pulls the total's slope
below the schedulers'.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, slope, slope_text

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


SIZES = (1_000, 3_000, 10_000)
GROWN = ("total_s", "scheduler_s", "scheduler_floor_s", "replay_wall_s", "overhead_ratio")


def run(python: Path, requests: int = 10000, runs: int = 3, warm: bool = True) -> dict[str, Any]:
    """Replay `requests` requests through both schedulers `runs` times, cold and (`warm`) in
    the warm worker in turn; the median run's figures (by total) with the medians and
    verdicts."""
    from vllm_plugin_release.replay import config, mix

    request_mix = mix.generate({**BENCH_MIX, "requests": requests}, REPO)
    replay_config = config.resolve(BENCH_REPLAY, REPO)
    cold, warm_s = [], []
    for _ in range(runs):
        cold.append(_cold(python, request_mix, replay_config))
        if warm:
            warm_s.append(_warm_total(python, request_mix, replay_config))
    median_run = sorted(cold, key=lambda r: r["total_s"])[len(cold) // 2]
    result = {**median_run, "runs": runs}
    for key in ("total_s", "cpu_s", "import_s", "scheduler_s", "scheduler_floor_s"):
        result[key] = round(statistics.median(r[key] for r in cold), 3)
    result["replay_wall_s"] = round(statistics.median(r["replay_wall_s"] for r in cold), 4)
    result["overhead_ratio"] = round(statistics.median(r["overhead_ratio"] for r in cold), 3)
    result["all_total_s"] = [r["total_s"] for r in cold]
    result["all_overhead_ratio"] = [r["overhead_ratio"] for r in cold]
    result["warm_worker_total_s"] = round(statistics.median(warm_s), 3) if warm else None
    result["targets"] = {
        "overhead_ratio": {
            "target": OVERHEAD_TARGET,
            "met": (result["overhead_ratio"] or 99) <= OVERHEAD_TARGET,
        },
        "total_s": {"target": TOTAL_TARGET_S, "met": result["total_s"] <= TOTAL_TARGET_S},
    }
    return result


def _cold(python: Path, request_mix: Any, replay_config: Any) -> dict[str, Any]:
    """One replay in a new interpreter of the pairing env: its figures."""
    from benchmarks.common import cpu_seconds
    from vllm_plugin_release.replay import runner
    from vllm_plugin_release.replay.model import build_report, timing_report

    cpu0 = cpu_seconds(own=False)
    start = time.perf_counter()
    raw = runner.run_raw(python, request_mix, replay_config)
    total = time.perf_counter() - start
    cpu = cpu_seconds(own=False) - cpu0
    t0 = time.perf_counter()
    report, _ = build_report(raw, request_mix, name="bench", replay_config={})
    metrics_s = time.perf_counter() - t0
    timing = timing_report(raw)
    return {
        "requests": len(request_mix),
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
        "cpu_s": round(cpu, 3),
        "host_metrics_s": round(metrics_s, 3),
    }


def _warm_total(python: Path, request_mix: Any, replay_config: Any) -> float:
    """The same run in the pairing env's warm worker, its imports already done (how `vpr
    conform` runs it: the worker's imports overlap with the other checks)."""
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


def growth(python: Path, sizes: list[int], runs: int) -> dict[str, Any]:
    """`run` at each size (the warm worker's run at the largest only): the result of the
    largest, with `growth`: per size its medians, and their slopes over the requests."""
    by_size = {n: run(python, n, runs, warm=n == max(sizes)) for n in sorted(sizes)}
    result = by_size[max(sizes)]
    points = {n: {key: r[key] for key in GROWN} for n, r in by_size.items()}
    slopes = {key: slope([(n, p[key]) for n, p in points.items()]) for key in GROWN}
    result["growth"] = {"sizes": points, "slopes": slopes, "slope_over": "requests"}
    return result


def _print_growth(result: dict[str, Any]) -> None:
    grown = result["growth"]
    print("replay growth: cold runs, medians at each size")
    for n, p in grown["sizes"].items():
        print(
            f"  {n:>6,} requests: total {p['total_s']:.2f} s, inside the schedulers "
            f"{p['scheduler_s']:.2f} s (slower one {p['scheduler_floor_s']:.2f} s), replay wall "
            f"{p['replay_wall_s']:.2f} s: overhead x{p['overhead_ratio']}"
        )
    slopes = ", ".join(f"{key} {slope_text(v)}" for key, v in grown["slopes"].items())
    print(f"  growth exponent (log-log slope over {grown['slope_over']}): {slopes}")


def _sizes(text: str) -> list[int]:
    """--sizes: request counts, comma-separated (argparse: exit 2 naming the option)."""
    try:
        sizes = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        sizes = []
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected request counts, e.g. 1000,3000")
    return sizes


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_replay")
    parser.add_argument("python", nargs="?", help="the pairing env's python")
    parser.add_argument("--sizes", type=_sizes, default=list(SIZES), help="request counts")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(list(argv or []))
    python = Path(args.python) if args.python else _python()
    result = growth(python, args.sizes, max(1, args.repeats))
    runs = result["runs"]
    verdict = "meets" if result["targets"]["total_s"]["met"] else "MISSES"
    print(
        f"replay of {result['requests']} requests through both schedulers, median of {runs}: "
        f"{result['total_s']:.1f} s in all, {result['cpu_s']:.1f} CPU s (vLLM import "
        f"{result['import_s']:.1f} s; target <= {TOTAL_TARGET_S:.0f} s: {verdict}); runs "
        + " ".join(f"{t:.1f}" for t in result["all_total_s"])
    )
    print(
        f"  inside the schedulers {result['scheduler_s']:.2f} s, replay wall "
        f"{result['replay_wall_s']:.2f} s: overhead x{result['overhead_ratio']} (target <= "
        f"{OVERHEAD_TARGET}: "
        f"{'meets' if result['targets']['overhead_ratio']['met'] else 'MISSES'}); runs "
        + " ".join(f"x{r}" for r in result["all_overhead_ratio"])
    )
    print(
        f"  floor: the slower scheduler's own time {result['scheduler_floor_s']:.1f} s (the two "
        "run side by side, one per core; the time inside them is vLLM's and the plugin's code)"
    )
    print(
        f"  in the warm worker (imports done before, as in `vpr conform`): "
        f"{result['warm_worker_total_s']:.1f} s"
    )
    for side, figures in result["per_scheduler"].items():  # the median run's
        print(
            f"  {side}: {figures['steps']} steps, {figures['scheduler_s']:.2f} s in scheduler, "
            f"{figures['loop_wall_s']:.2f} s loop (x{figures['overhead_ratio']})"
        )
    _print_growth(result)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
