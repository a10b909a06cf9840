"""Core isolation scan vs `rg -w -i`, side by side on the same tree and symbols.

Each repeat runs, in turn: ripgrep (`rg -w -i -e SYM ... TREE`), our scan in this
process (`scan_tree`, its files shared out over the usable cores as the command does),
and the command end to end (`python -m vllm_plugin_release scan-core TREE --symbols ...
--json`, interpreter start-up included). Medians are
reported with their ratios to ripgrep; the budget is `scan <= 3 x rg`.

Growth: the same three, side by side, at three tree sizes made from
the tree with hard links (the same files, so the same page cache): a third of it (every
third file of its sorted listing), the tree itself (the headline above) and three copies
of it side by side, each as medians of the repeats; the growth exponent of each (the
log-log slope of its median seconds over the bytes the scan read) is printed. Linear
work has a slope of 1; the command's start-up, the same at every size, pulls its slope
below the scan's.

    python benchmarks/bench_isolation.py /path/to/vllm-0.26.0 [--repeats 5] [--json]
        [--no-growth]

Exit 1 when the scan is over budget, 2 when the tree or ripgrep is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, installed_env, slope, slope_text
from vllm_plugin_release.conform.lib.symbols import TT_SYMBOLS, scan_tree
from vllm_plugin_release.edges.proc import usable_cores

MAX_RATIO = 3.0


def _rg_command(rg: str, tree: Path, symbols: Sequence[str]) -> list[str]:
    cmd = [rg, "-w", "-i"]
    for symbol in symbols:
        cmd += ["-e", symbol]
    return [*cmd, str(tree)]


def _timed(cmd: list[str]) -> tuple[float, bytes]:
    started = time.perf_counter()
    proc = subprocess.run(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=installed_env(), check=False
    )
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):  # rg: 1 = no match; scan-core: 1 = failing hit
        raise RuntimeError(f"{cmd[0]} exited {proc.returncode}")
    return elapsed, proc.stdout


def run(
    tree: Path,
    repeats: int = 5,
    symbols: Sequence[str] = TT_SYMBOLS,
    max_ratio: float = MAX_RATIO,
) -> dict[str, Any]:
    """Time ripgrep, the in-process scan and the CLI side by side; medians and ratios."""
    tree = Path(tree)
    if not tree.is_dir():
        raise FileNotFoundError(f"{tree}: not a directory (pass the extracted vLLM tree)")
    rg = shutil.which("rg")
    if rg is None:
        raise FileNotFoundError("ripgrep (rg) not found: apt-get install -y ripgrep")
    rg_cmd = _rg_command(rg, tree, symbols)
    cli_cmd = [
        sys.executable,
        "-m",
        "vllm_plugin_release",
        "scan-core",
        str(tree),
        "--symbols",
        ",".join(symbols),
        "--json",
    ]
    env_python = [sys.executable, "-c", "pass"]

    # warm the page cache and the interpreter once, untimed
    _, rg_out = _timed(rg_cmd)
    workers = usable_cores()  # as `vpr scan-core` shares the files out
    report = scan_tree(tree, symbols, workers=workers)
    _timed(cli_cmd)

    rg_t: list[float] = []
    scan_t: list[float] = []
    cli_t: list[float] = []
    py_t: list[float] = []
    for _ in range(repeats):
        rg_t.append(_timed(rg_cmd)[0])
        started = time.perf_counter()
        report = scan_tree(tree, symbols, workers=workers)
        scan_t.append(time.perf_counter() - started)
        cli_t.append(_timed(cli_cmd)[0])
        py_t.append(_timed(env_python)[0])

    rg_median = statistics.median(rg_t)
    scan_median = statistics.median(scan_t)
    cli_median = statistics.median(cli_t)
    rg_files = subprocess.run(
        [rg, "--files", str(tree)], stdout=subprocess.PIPE, check=False
    ).stdout.count(b"\n")
    substring = subprocess.run(
        [rg, "-i", "-o", "--no-filename", *[a for s in symbols for a in ("-e", s)], str(tree)],
        stdout=subprocess.PIPE,
        check=False,
    ).stdout.count(b"\n")
    ratio = scan_median / rg_median
    return {
        "tree": str(tree),
        "symbols": list(symbols),
        "repeats": repeats,
        "cpus": os.cpu_count(),
        "rg_command": " ".join([*rg_cmd[:1], "-w", "-i", "-e", "SYM", "...", str(tree)]),
        "rg_seconds": round(rg_median, 4),
        "scan_seconds": round(scan_median, 4),
        "cli_seconds": round(cli_median, 4),
        "python_startup_seconds": round(statistics.median(py_t), 4),
        "ratio": round(ratio, 2),
        "cli_ratio": round(cli_median / rg_median, 2),
        "max_ratio": max_ratio,
        "ok": ratio <= max_ratio,
        "rg_files": rg_files,
        "scan_files": report.files_scanned + len(report.skipped),
        "scan_bytes": report.bytes_scanned,
        "rg_word_matches": rg_out.count(b"\n"),
        "rg_substring_matches": substring,
        "scan_hits": len(report.hits),
        "scan_failing_hits": sum(1 for h in report.hits if h.severity == "fail"),
        "all_seconds": {
            "rg": [round(t, 4) for t in rg_t],
            "scan": [round(t, 4) for t in scan_t],
            "cli": [round(t, 4) for t in cli_t],
        },
    }


def _print(result: dict[str, Any]) -> None:
    r = result
    print(f"core isolation benchmark: {r['tree']} ({r['repeats']} repeats, {r['cpus']} CPUs)")
    print(f"  symbols: {', '.join(r['symbols'])}")
    print(f"  rg -w -i          median {r['rg_seconds']:.3f} s  ({r['rg_files']} files searched)")
    print(
        f"  scan (in process) median {r['scan_seconds']:.3f} s  ({r['scan_files']} files read)"
        f"  ratio {r['ratio']:.2f}x  (budget {r['max_ratio']:.1f}x)"
    )
    print(
        f"  vpr scan-core     median {r['cli_seconds']:.3f} s  ratio {r['cli_ratio']:.2f}x"
        f"  (python start-up alone {r['python_startup_seconds']:.3f} s)"
    )
    print(
        f"  matches: rg -i substrings {r['rg_substring_matches']}, rg -w -i "
        f"{r['rg_word_matches']}, scan hits {r['scan_hits']} "
        f"({r['scan_failing_hits']} failing)"
    )
    print("  OK" if r["ok"] else "  OVER BUDGET")


# (label, copies of the tree, every n-th file of it): a third, the tree, three copies.
GROWTH = (("a third", 1, 3), ("the tree", 1, 1), ("3 copies", 3, 1))
TIMES = (("rg", "rg_seconds"), ("scan", "scan_seconds"), ("vpr scan-core", "cli_seconds"))


def _grown(tree: Path, root: Path, copies: int, every: int) -> Path:
    """`copies` copies of `tree` under `root`, each with every `every`-th file of its sorted
    listing: hard links where the file system allows (copies else). Symbolic links are
    left out (the scan skips them, ripgrep does not follow them)."""
    files = sorted(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
    for copy in range(copies):
        for path in files[::every]:
            target = root / f"copy{copy}" / path.relative_to(tree)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, target)
            except OSError:
                shutil.copy2(path, target)
    return root


def growth(
    tree: Path,
    repeats: int = 5,
    whole: dict[str, Any] | None = None,
    symbols: Sequence[str] = TT_SYMBOLS,
) -> dict[str, Any]:
    """`run` at each size of GROWTH (`whole`: the headline's result for the tree itself,
    reused); per size its medians and ratios, and the slope of each time over the bytes."""
    tree = Path(tree)
    scratch = REPO / ".vpr" / "bench"  # beside the cached tree: hard links need one disk
    scratch.mkdir(parents=True, exist_ok=True)
    sizes: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="scan-growth-", dir=scratch) as tmp:
        for label, copies, every in GROWTH:
            if (copies, every) == (1, 1):
                # a copy: the headline's result gets this growth, which would then hold it
                sizes[label] = dict(whole) if whole else run(tree, repeats, symbols)
                continue
            where = _grown(tree, Path(tmp) / f"x{copies}-every{every}", copies, every)
            sizes[label] = run(where, repeats, symbols)
    by_bytes = sorted(sizes.values(), key=lambda r: r["scan_bytes"])
    slopes = {name: slope([(r["scan_bytes"], r[key]) for r in by_bytes]) for name, key in TIMES}
    return {"sizes": sizes, "slopes": slopes, "slope_over": "bytes the scan read"}


def _print_growth(result: dict[str, Any]) -> None:
    print("scan growth: medians at three tree sizes (hard-linked from the tree), same run")
    for label, r in result["sizes"].items():
        print(
            f"  {label:9} {r['scan_files']:6d} files {r['scan_bytes'] / 1e6:7.1f} MB: rg "
            f"{r['rg_seconds']:.3f} s, scan {r['scan_seconds']:.3f} s, vpr scan-core "
            f"{r['cli_seconds']:.3f} s; ratio to rg {r['ratio']:.2f}x in process, "
            f"{r['cli_ratio']:.2f}x end to end"
        )
    slopes = ", ".join(f"{name} {slope_text(v)}" for name, v in result["slopes"].items())
    print(f"  growth exponent (log-log slope over {result['slope_over']}): {slopes}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "tree",
        nargs="?",
        default=os.environ.get("VPR_BENCH_VLLM_TREE") or os.environ.get("VPR_TEST_VLLM_TREE"),
        help="extracted vLLM source tree (default: $VPR_BENCH_VLLM_TREE)",
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-ratio", type=float, default=MAX_RATIO)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--no-growth", action="store_true", help="the tree's size alone")
    args = parser.parse_args([] if argv is None else argv)
    if not args.tree:
        args.tree = str(_verified_tree())
    try:
        result = run(Path(args.tree), args.repeats, max_ratio=args.max_ratio)
        if not args.no_growth:
            result["growth"] = growth(Path(args.tree), max(3, args.repeats), whole=result)
    except FileNotFoundError as exc:
        print(f"bench_isolation: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
        if "growth" in result:
            _print_growth(result["growth"])
    return 0 if result["ok"] else 1


def _verified_tree() -> Path:
    """The pinned vLLM sdist tree from the pipeline's own verified cache (fetched if needed)."""
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.edges.fetch import Fetcher, source_tree

    repo = Path(__file__).resolve().parent.parent
    spec = load_spec(repo / "buildspec" / "reference.toml")
    return source_tree(spec, Fetcher(Cache(repo / ".vpr")))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
