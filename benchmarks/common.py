"""Timing helpers shared by the benchmarks: medians of repeated runs, a ratio table."""

from __future__ import annotations

import math
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
console = Console()


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def cpu_seconds(*, own: bool = True) -> float:
    """User + system seconds so far of the processes this one has waited for (and
    theirs), plus its own unless `own` is False."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = kids.ru_utime + kids.ru_stime
    if own:
        me = resource.getrusage(resource.RUSAGE_SELF)
        total += me.ru_utime + me.ru_stime
    return total


def installed_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: ours) without PYTHONDONTWRITEBYTECODE: vpr runs as an installed
    package does, with its bytecode cached (pip writes it on install; where the variable
    is set, every start-up would compile vpr's modules and its libraries again)."""
    return {k: v for k, v in (base or os.environ).items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(
    *argv: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    ok: tuple[int, ...] = (0,),
) -> None:
    """Run a step of a benchmark; `env` as given, else `installed_env()`. `ok`: the exit
    codes that are not a failed step (a release's verdict `lab` is exit 1)."""
    env = installed_env() if env is None else env
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode not in ok:
        raise SystemExit(f"benchmark step failed: {' '.join(argv)}\n{done.stderr[-3000:]}")


def vpr(*args: str, cwd: Path = REPO, ok: tuple[int, ...] = (0,)) -> None:
    run(sys.executable, "-m", "vllm_plugin_release", *args, cwd=cwd, ok=ok)


def median(values: list[float]) -> float:
    return statistics.median(values)


def report(
    title: str, rows: dict[str, list[float]], ratios: list[tuple[str, str, str, float]]
) -> dict:
    """Print medians and ratios; return them as data. ratios: (label, num, den, target)."""
    table = Table(title=title)
    table.add_column("case")
    table.add_column("median s", justify="right")
    table.add_column("runs", justify="right")
    for name, values in rows.items():
        table.add_row(name, f"{median(values):.3f}", " ".join(f"{v:.2f}" for v in values))
    console.print(table)
    result: dict = {"medians": {k: median(v) for k, v in rows.items()}, "ratios": {}}
    for label, num, den, target in ratios:
        ratio = median(rows[num]) / median(rows[den])
        ok = "meets" if ratio <= target else "MISSES"
        console.print(f"  {label}: {ratio:.3f}x (target <= {target}x: {ok})")
        result["ratios"][label] = {"ratio": ratio, "target": target, "met": ratio <= target}
    return result


def base_commit(given: str | None, first_file: str) -> str:
    """The code before a piece of work, for a side-by-side benchmark: `given`, else the
    parent of the commit that added `first_file` (HEAD when it is not committed yet)."""
    if given:
        return given
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", first_file],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return f"{added[-1]}^" if added else "HEAD"


def slope(points: list[tuple[float, float]]) -> float | None:
    """The growth exponent: the least-squares slope of log(y) over log(x), from (x, y)
    points with both positive (None with fewer than two such, or one x alone). 1 is
    linear growth, 0 flat, 0.5 a square root."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def slope_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
