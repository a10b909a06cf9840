"""Core isolation scan vs `rg -w -i`, side by side on the same tree and symbols.

Each repeat runs, in turn: ripgrep (`rg -w -i -e SYM ... TREE`), our scan in this
process (`scan_tree`, its files shared out over the usable cores as the command does),
and the command end to end (`python -m vllm_plugin_release scan-core TREE --symbols ...
--json`, interpreter start-up included). Medians are
reported with their ratios to ripgrep; the budget is `scan <= 3 x rg`.

    python benchmarks/bench_isolation.py /path/to/vllm-0.26.0 [--repeats 5] [--json]

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
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import installed_env
from vllm_plugin_release.conform.lib.symbolmatch import TT_SYMBOLS
from vllm_plugin_release.conform.lib.symbolscan import scan_tree
from vllm_plugin_release.edges.forkmap import usable_cores

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
    args = parser.parse_args([] if argv is None else argv)
    if not args.tree:
        args.tree = str(_verified_tree())
    try:
        result = run(Path(args.tree), args.repeats, max_ratio=args.max_ratio)
    except FileNotFoundError as exc:
        print(f"bench_isolation: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
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
