"""`python -m benchmarks [--repeats N] [NAME ...]`: run the benchmarks side by side, print
each measure with its target, write .vpr/bench/results.json.

Every figure is a median of repeated runs in this one process run, and the ratios are
between cases measured side by side (same machine, same load), never absolute timings
asserted in tests. On a shared machine the absolute seconds (cold release, replay) move
with the load: compare ratios, and re-run when the machine is quiet.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable
from typing import Any

from rich.table import Table

from benchmarks.common import REPO, console

BENCHES = (
    "analysers",
    "build_core",
    "container",
    "coupling",
    "env",
    "executor",
    "guard",
    "install",
    "isolation",
    "replay",
    "release",
    "site",
    "store",
    "tt",
    "upstream",
)
OPT_IN = ("matrix",)  # many minutes: run only when named (`nox -s bench -- matrix`)


def _isolation(repeats: int | None) -> dict[str, Any]:
    from benchmarks import bench_isolation

    try:
        tree = bench_isolation._verified_tree()
        result = bench_isolation.run(tree, repeats or 5)
        result["growth"] = bench_isolation.growth(tree, max(3, repeats or 5), whole=result)
    except FileNotFoundError as exc:  # no ripgrep here: the rows say n/a, the others run
        console.print(f"[yellow]bench isolation skipped: {exc}")
        return {"skipped": str(exc)}
    bench_isolation._print(result)
    bench_isolation._print_growth(result["growth"])
    return result


def _run(name: str, repeats: int | None) -> dict[str, Any]:
    if name == "isolation":
        return _isolation(repeats)
    module = importlib.import_module(f"benchmarks.bench_{name}")
    if name == "replay":  # 1,000, 3,000 and 10,000 requests (bench_replay --sizes)
        return module.main(["--repeats", str(repeats)] if repeats else [])
    if name == "store":
        return module.main(["--repeats", str(repeats)] if repeats else [])
    if name == "matrix":
        return module.main(*((repeats,) if repeats else ()))
    if name in ("release", "tt"):
        return module.main(*((repeats, repeats) if repeats else ()))
    return module.main(*((repeats,) if repeats else ()))


def _ratio(bench: str, label: str) -> Callable[[dict[str, Any]], float | None]:
    return lambda r: r.get(bench, {}).get("ratios", {}).get(label, {}).get("ratio")


def _store(case: str, way: str, slope: bool = False) -> Callable[[dict[str, Any]], float | None]:
    """bench_store's median for `case` at 10,000 pairings (or its growth exponent)."""

    def get(r: dict[str, Any]) -> float | None:
        data = r.get("store", {}).get("cases", {}).get(case, {})
        if slope:
            value = data.get("slopes", {}).get(way)
        else:
            medians = data.get("medians", {})
            value = medians.get(10_000, medians.get("10000", {})).get(way)
        return value if isinstance(value, int | float) else None

    return get


def _key(bench: str, *path: str) -> Callable[[dict[str, Any]], float | None]:
    def get(r: dict[str, Any]) -> float | None:
        value: Any = r.get(bench, {})
        for key in path:
            value = value.get(key, {}) if isinstance(value, dict) else {}
        return value if isinstance(value, int | float) else None

    return get


# The table: (measure, bench, figure, target, unit); target None: shown, not judged.
ROWS: tuple[tuple[str, str, Callable[[dict[str, Any]], float | None], float | None, str], ...] = (
    ("vpr build-core cold / bare python -m build", "build_core",
     _ratio("build_core", "cold / bare"), 1.0, "x"),
    ("  the same, the bare build in vpr's build scratch (/dev/shm)", "build_core",
     _ratio("build_core", "cold / bare in the same scratch"), 1.0, "x"),
    ("vpr build-core warm / cold", "build_core", _ratio("build_core", "warm / cold"), 0.02, "x"),
    ("vpr env (hashes + in-env checks) / plain uv pip install", "env",
     _ratio("env", "vpr env / plain"), 2.0, "x"),
    ("  the same, first environment of its lock (no kept bytecode)", "env",
     _ratio("env", "first env of its lock / plain"), None, "x"),
    ("  the install alone / plain uv pip install", "env",
     _ratio("env", "install only / plain"), None, "x"),
    ("vpr scan-core end to end / rg -w -i", "isolation", _key("isolation", "cli_ratio"), 1.5, "x"),
    ("  in-process scan / rg -w -i", "isolation", _key("isolation", "ratio"), None, "x"),
    ("  growth exponent of vpr scan-core (a third, the tree, 3 copies)", "isolation",
     _key("isolation", "growth", "slopes", "vpr scan-core"), None, ""),
    ("  growth exponent of rg -w -i, the same trees", "isolation",
     _key("isolation", "growth", "slopes", "rg"), None, ""),
    ("  vpr scan-core / rg -w -i over 3 copies of the tree", "isolation",
     _key("isolation", "growth", "sizes", "3 copies", "cli_ratio"), None, "x"),
    ("replay of 10,000 requests, both schedulers", "replay", _key("replay", "total_s"), 20.0,
     " s"),
    ("  the same in the warm worker (as vpr conform runs it)", "replay",
     _key("replay", "warm_worker_total_s"), 20.0, " s"),
    ("  floor: the slower scheduler's own time (the two side by side)", "replay",
     _key("replay", "scheduler_floor_s"), None, " s"),
    ("  replay overhead (wall / inside the schedulers)", "replay",
     _key("replay", "overhead_ratio"), 1.1, "x"),
    ("  growth exponent of the replay's total (1,000, 3,000, 10,000 requests)",
     "replay", _key("replay", "growth", "slopes", "total_s"), None, ""),
    ("  growth exponent of the time inside the schedulers, the same", "replay",
     _key("replay", "growth", "slopes", "scheduler_s"), None, ""),
    ("  growth exponent of the overhead ratio, the same", "replay",
     _key("replay", "growth", "slopes", "overhead_ratio"), None, ""),
    ("vpr release cold (fresh .vpr, warm uv cache)", "release",
     _key("release", "medians", "cold release (fresh .vpr)"), 45.0, " s"),
    ("  its CPU time (user + sys, every process)", "release", _key("release", "cold_cpu_s"),
     None, " s"),
    ("  floor: that CPU time over the usable cores", "release", _key("release", "cpu_floor_s"),
     None, " s"),
    ("vpr release warm / cold", "release", _ratio("release", "warm / cold"), 0.02, "x"),
    ("vpr release warm, this code / the code at --base", "executor",
     _ratio("executor", "graph / before"), 1.05, "x"),
    ("vpr --help, this code / the code at --base", "executor",
     _ratio("executor", "help / before"), 1.05, "x"),
    ("TT release cold / reference cold (3.10, real ttnn)", "tt",
     _ratio("tt", "tt cold / reference cold"), 2.0, "x"),
    ("TT release warm / TT cold", "tt", _ratio("tt", "tt warm / tt cold"), 0.05, "x"),
    ("vpr build-core in the pinned container cold / local cold", "container",
     _ratio("container", "container cold / local cold"), 1.5, "x"),
    ("  the container's warm re-run / its cold build", "container",
     _ratio("container", "container warm / cold"), 0.1, "x"),
    ("vpr manifest query, one pairing of 10,000: the command's CPU", "store",
     _store("query, one pairing", "command cpu"), 0.3, " s"),
    ("  the same, in process", "store", _store("query, one pairing", "in process cpu"), 0.1, " s"),
    ("  log-log slope of the command, 1k to 100k pairings (<= 0.48: 3x per 10x)", "store",
     _store("query, one pairing", "command cpu", slope=True), 0.48, ""),
    ("vpr manifest matrix over 10,000 pairings: the command's CPU", "store",
     _store("matrix", "command cpu"), 0.3, " s"),
    ("  the same in process", "store", _store("matrix", "in process cpu"), 0.1, " s"),
    ("  log-log slope of the command, the same sizes", "store",
     _store("matrix", "command cpu", slope=True), 0.48, ""),
    ("vpr install warm, store verified first / before", "install",
     _ratio("install", "verified / before"), 1.10, "x"),
    ("  the same in CPU time (the command and its children)", "install",
     _ratio("install", "verified / before, cpu"), None, "x"),
    ("  in process: the verification / the whole warm install", "install",
     _ratio("install", "verification / whole install"), None, "x"),
    ("vpr-guard: its check inside vLLM's start-up", "guard", _key("guard", "check_s"),
     0.050, " s"),
    ("  load_general_plugins(), median with - without the guard", "guard",
     _key("guard", "added_s"), None, " s"),
    ("  the whole command with / without the guard, wall", "guard", _key("guard", "wall_ratio"),
     None, "x"),
    ("  the same in CPU time", "guard", _key("guard", "cpu_ratio"), None, "x"),
    ("vpr manifest site, reference + Ascend + Spyre store", "site",
     _key("site", "real_s"), 2.0, " s"),
    ("vpr manifest site, 1,000 pairings", "site", _key("site", "synthetic_s"), 2.0, " s"),
    ("vpr bump's API coupling report, two cores, cold", "coupling", _key("coupling", "cold_s"),
     10.0, " s"),
    ("  warm (each core module's facts cached)", "coupling", _key("coupling", "warm_s"), 2.0,
     " s"),
    ("  before the facts cache (fewer rules)", "coupling", _key("coupling", "before_s"), None,
     " s"),
    ("  in process", "site", _key("site", "synthetic_in_process_s"), None, " s"),
    ("TT matrix 0.25.1 -> newest, cold (fresh .vpr, warm uv cache)", "matrix",
     _key("matrix", "cold_s"), 1500.0, " s"),
    ("  the warm re-run (every column's record reused)", "matrix", _key("matrix", "warm_s"),
     90.0, " s"),
)  # fmt: skip


def summary(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The table's rows for the benches that ran: figure, target, met."""
    rows = []
    for measure, bench, figure, target, unit in ROWS:
        if bench not in results:
            continue
        value = figure(results)
        met = None if value is None or target is None else value <= target
        rows.append(
            {"measure": measure.strip(), "value": value, "target": target, "unit": unit.strip(),
             "met": met}
        )  # fmt: skip
    return rows


def print_summary(rows: list[dict[str, Any]]) -> None:
    table = Table(title="targets (medians, side by side in this run)")
    table.add_column("measure")
    table.add_column("now", justify="right")
    table.add_column("target", justify="right")
    table.add_column("")
    for row in rows:
        unit = "" if row["unit"] in ("x", "") else " "
        value = "n/a" if row["value"] is None else f"{row['value']:.3f}{unit}{row['unit']}"
        target = "-" if row["target"] is None else f"<= {row['target']}{unit}{row['unit']}"
        verdict = {True: "[green]meets", False: "[red]MISSES", None: ""}[row["met"]]
        table.add_row(row["measure"], value, target, verdict)
    console.print(table)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(BENCHES + OPT_IN))
    parser.add_argument("--repeats", type=int, help="repeats per case (default: each bench's)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(BENCHES + OPT_IN))
    if unknown:
        known = ", ".join(BENCHES + OPT_IN)
        parser.error(f"unknown bench {', '.join(unknown)}; expected some of {known}")
    results: dict[str, Any] = {}
    failed = []
    for name in args.names or BENCHES:
        console.rule(f"bench {name}")
        try:
            results[name] = _run(name, args.repeats)
        except (Exception, SystemExit) as exc:  # one bench's failure: the others still run
            console.print(f"[red]bench {name} failed: {exc}")
            results[name] = {"failed": str(exc)[-2000:]}
            failed.append(name)
    rows = summary(results)
    if rows:  # only the benches of the speed table (not `upstream` alone)
        print_summary(rows)
    results["targets"] = rows
    out = REPO / ".vpr" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    console.print(f"written: {out / 'results.json'}")
    if failed:
        console.print(f"[red]failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
