"""The manifest store's scale targets:

- `vpr manifest query` and `vpr manifest matrix` read the store's summary, not its whole
  index: over 10,000 pairings <= 0.3 s end to end (the command's CPU seconds, interpreter
  start-up included) and <= 0.1 s in process, and flat or logarithmic in the store's size:
  10x the pairings costs <= 3x the time (a log-log slope <= 0.48). Measured at 1,000,
  10,000 and 100,000 pairings (generated: 5 plugins x n/5 core versions, each entry with
  its wheels, lock and two history lines): a query of one pairing (--core and --plugin), a
  query of one core (5 pairings), and the matrix (every pairing: the summary holds it
  rendered). A query of every pairing is shown too: its answer grows with the store, so
  it does (O(answer), not judged by the growth target);
- `vpr manifest ledger` over a ledger of one entry per pairing, reading the ledger's
  summary: the entries of one pairing (--core and --plugin, a plugin commit), of one core
  (5 entries), and the matrix (--matrix markdown: the summary holds it rendered); every
  entry is shown too (without filters the command reads and checks every line: O(store),
  not judged by the growth target);
- the same commands over the same store without its summaries (as a store published
  before them: the whole index.json, the whole ledger is read), up to 10,000 pairings: the
  figures before;
- `vpr manifest check-env` of a 150-pin environment (148 small real distributions plus
  the core and plugin, installed by uv into a venv) in <= 1 s.

Each figure is the median of several runs, in this process (the library calls the
command makes: the signed head, the summary, the query or matrix, the text) and as the
command (`python -m vllm_plugin_release ...`, start-up included), each as wall and CPU
time (this process, or the child's): on a shared machine the wall time also counts
waiting for a core, the CPU time does not. The growth exponent is the slope of a
least-squares line through (log pairings, log seconds). Printed, never asserted.

    python -m benchmarks.bench_store [--repeats 3] [--sizes 1000,10000,100000]
        [--before-up-to 10000] [--no-check-env]
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, console, cpu_seconds, installed_env, median, slope

SIZES = (1_000, 10_000, 100_000)
PLUGINS = 5
TARGET_AT = 10_000
TARGET_COMMAND_CPU = 0.3  # s, the command's CPU seconds at TARGET_AT pairings
TARGET_IN_PROCESS = 0.1  # s, in process at TARGET_AT pairings
TARGET_GROWTH = 3.0  # x per 10x the pairings
TARGET_CHECK_ENV = 1.0  # s
WAYS = ("in process", "in process cpu", "command", "command cpu")


def measured(fn: Callable[[], object], repeats: int, *, child: bool) -> tuple[list[float], ...]:
    """(wall seconds, CPU seconds) of each run: this process's CPU, or (`child`) the CPU
    of the processes it ran and waited for."""
    wall, cpu = [], []
    for _ in range(repeats):
        before, start = cpu_seconds(own=not child), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(cpu_seconds(own=not child) - before)
    return wall, cpu


def _store(root: Path, n: int, plugins: int = PLUGINS) -> Path:
    """A store of `n` pairings in `root`/store, as a publisher writes it: index.json, its
    summary and the signed head."""
    sys.path.insert(0, str(REPO))
    from tests.pairing import built_manifest, manifest_variant, sign_store, typed
    from vllm_plugin_release.core import ledger
    from vllm_plugin_release.core import storeindex as si

    base = built_manifest(root / "dist")
    index = si.empty_index()
    lines: list[bytes] = []
    key = _key(root)
    for i in range(n):
        m = manifest_variant(base, commit=f"{i % plugins:040x}", core=f"0.{i // plugins}.0")
        m = copy.deepcopy(m)
        m["plugin"]["name"] = f"vllm-vendor-plugin-{i % plugins}"
        t = typed(m)
        runs = [
            si.run_record(t, f"{i:064x}", f"2026-11-{1 + k:02d}T00:00:00Z", si.PublishedAt("local"))
            for k in range(2)
        ]
        extras = si.EntryExtras(tuple(runs), {}, True)
        index.pairings[m["pairing_id"]] = si.entry_for(t, f"{i:064x}", True, extras)
        entry = ledger.entry_from_manifest(
            t, manifest_sha256=f"{i:064x}", runner="cpu", time="2026-11-01T00:00:00Z"
        )  # one release entry per pairing: a ledger of n entries
        lines.append(ledger.sign_line(ledger.chained(entry, lines[-1] if lines else None, i), key))
    store = root / "store"
    (store / "ledger").mkdir(parents=True)
    (store / "index.json").write_bytes(si.index_bytes(index))
    (store / ledger.LEDGER_FILE).write_bytes(b"".join(lines))
    sign_store(store, key)  # the head over every file; the summary made first
    return store


def _without_summary(store: Path, root: Path) -> Path:
    """A copy of `store` as one published before summaries: its head names index.json."""
    from tests.pairing import sign_store

    plain = root / "plain"
    shutil.copytree(store, plain, ignore=shutil.ignore_patterns("summary*", "head.json"))
    sign_store(plain, _key(root), check=False)
    return plain


def _key(root: Path) -> Any:
    """The bench's manifest key (root/key.pub is what the commands verify with)."""
    from vllm_plugin_release.edges import keys

    private = root / "key"
    if not private.exists():
        keys.generate_keypair(private)
    return keys.load_private_key(private)


def _env(root: Path, pins: int = 148) -> tuple[Path, Path, Path]:
    """A venv holding `pins` small distributions + the manifest's core and plugin; (python,
    manifest, lock)."""
    from tests.pairing import built_manifest, write_manifest, write_wheel
    from vllm_plugin_release.core.cache import sha256_file
    from vllm_plugin_release.edges.uv import uv_bin

    dist = root / "pairing"
    manifest = built_manifest(dist)
    wheels = [
        write_wheel(root / "wheels", f"bench-pin-{i}", "1.0", {f"bench_pin_{i}/__init__.py": ""})
        for i in range(pins)
    ]
    lock_lines = [f"bench-pin-{i}==1.0 \\\n    --hash=sha256:{sha256_file(w)}" for i, w in
                  enumerate(wheels)]  # fmt: skip
    lock = root / "lock.txt"
    lock.write_text("\n".join(lock_lines) + "\n")
    manifest["environment"]["lock_sha256"] = hashlib.sha256(lock.read_bytes()).hexdigest()
    manifest_path = write_manifest(dist, manifest, "manifest.json")
    from vllm_plugin_release.core import attest

    statement = attest.build_statement(  # check-env verifies the signature first
        manifest, sha256_file(manifest_path), {}, builder_id=attest.LOCAL_BUILDER
    )
    (dist / "manifest.intoto.jsonl").write_bytes(attest.signed_bytes(statement, _key(root)))
    venv = root / "venv"
    subprocess.run([uv_bin(), "venv", "-q", str(venv)], check=True)
    python = venv / "bin" / "python"
    all_wheels = [*wheels, *sorted(dist.glob("*.whl"))]
    subprocess.run(
        [uv_bin(), "pip", "install", "-q", "--python", str(python), "--no-deps", "--offline",
         *map(str, all_wheels)],
        check=True,
    )  # fmt: skip
    return python, manifest_path, lock


def _cli(env: dict[str, str], *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "vllm_plugin_release", *args],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"vpr {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")


def _cases(store: Path, root: Path, n: int) -> dict[str, tuple[Callable[[], object], list[str]]]:
    """name -> (the library calls in process, the command's arguments)."""
    from vllm_plugin_release.core import ledger, storeindex
    from vllm_plugin_release.core.summary import LEDGER
    from vllm_plugin_release.edges import trust
    from vllm_plugin_release.edges.store import DirStore
    from vllm_plugin_release.edges.trust import Trusted

    public = _key(root).public_key()
    core = f"0.{n // PLUGINS // 2}.0"  # a core in the middle of the store
    plugin = "vllm-vendor-plugin-1"
    commit = "0" * 39 + "1"  # that plugin's commit (a ledger's --plugin: a name or a commit)

    def trusted() -> Trusted:  # through the signed head, as the commands read it
        return Trusted(DirStore(store), public, memory=None)

    def ledger_lines(**filters: str) -> Callable[[], object]:
        return lambda: ledger.render_lines(trust.select(trusted(), **filters)[0])

    def query(**filters: str) -> Callable[[], object]:
        return lambda: storeindex.query_text(trust.query(trusted(), **filters), str(store))

    key = ["--store", str(store), "--key", str(root / "key.pub")]
    return {
        "query, one pairing": (
            query(core=core, plugin=plugin),
            ["manifest", "query", *key, "--core", core, "--plugin", plugin],
        ),
        "query, one core (5)": (query(core=core), ["manifest", "query", *key, "--core", core]),
        "matrix": (
            lambda: trust.matrix(trusted(), "table"),
            ["manifest", "matrix", *key],
        ),
        "query, every pairing": (query(), ["manifest", "query", *key]),
        "ledger, one pairing": (
            ledger_lines(core=core, plugin=commit),
            ["manifest", "ledger", *key, "--core", core, "--plugin", commit],
        ),
        "ledger, one core (5)": (
            ledger_lines(core=core),
            ["manifest", "ledger", *key, "--core", core],
        ),
        "ledger matrix": (
            lambda: trust.matrix(trusted(), "markdown", LEDGER),
            ["manifest", "ledger", *key, "--matrix", "markdown"],
        ),
        "ledger, every entry": (
            lambda: ledger.render_lines(trusted().ledger()),
            ["manifest", "ledger", *key],
        ),
    }


def _measure_size(
    n: int, repeats: int, before_up_to: int
) -> tuple[dict[str, dict[str, list[float]]], dict[str, int]]:
    """The cases over a store of `n` pairings (and over the store without its summary,
    when `n` <= `before_up_to`); the sizes of its index and summary."""
    rows: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="vpr-bench-store-") as tmp:
        root = Path(tmp)
        env = {**installed_env(), "VPR_CACHE_DIR": str(root / ".vpr")}
        console.print(f"[dim]store of {n} pairings: generating…[/dim]")
        store = _store(root, n)
        stores = {"": store}
        if n <= before_up_to:
            stores[" (no summary: before)"] = _without_summary(store, root)
        for label, where in stores.items():
            for case, (fn, argv) in _cases(where, root, n).items():
                if label and case.startswith(("query, one core", "ledger, one core")):
                    continue
                wall, cpu = measured(fn, repeats, child=False)
                cmd_wall, cmd_cpu = measured(lambda a=argv: _cli(env, *a), repeats, child=True)
                rows[case + label] = dict(zip(WAYS, (wall, cpu, cmd_wall, cmd_cpu), strict=True))
        sizes = {
            "index_bytes": (store / "index.json").stat().st_size,
            "summary_json_bytes": (store / "summary.json").stat().st_size,
            "summary_dir_bytes": sum(p.stat().st_size for p in (store / "summary").iterdir()),
            "ledger_bytes": (store / "ledger" / "ledger.jsonl").stat().st_size,
            "ledger_summary_json_bytes": (store / "ledger" / "summary.json").stat().st_size,
        }
    return rows, sizes


def _check_env(repeats: int) -> dict[str, float]:
    from vllm_plugin_release.stages import verify

    with tempfile.TemporaryDirectory(prefix="vpr-bench-check-env-") as tmp:
        root = Path(tmp)
        python, manifest_path, lock = _env(root)
        from vllm_plugin_release.core import manifestdoc

        manifest = manifestdoc.load(manifest_path)
        lock_text = lock.read_text()

        def check_env() -> None:
            problems = verify.check_environment(manifest, python, None, lock_text)
            assert not problems, problems

        argv = ["manifest", "check-env", "--manifest", str(manifest_path), "--python",
                str(python), "--lock", str(lock), "--key", str(root / "key.pub")]  # fmt: skip
        env = {**installed_env(), "VPR_CACHE_DIR": str(root / ".vpr")}
        wall, cpu = measured(check_env, repeats, child=False)
        cmd_wall, cmd_cpu = measured(lambda: _cli(env, *argv), repeats, child=True)
    return {way: median(v) for way, v in zip(WAYS, (wall, cpu, cmd_wall, cmd_cpu), strict=True)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--before-up-to", type=int, default=TARGET_AT)
    parser.add_argument("--no-check-env", action="store_true")
    args = parser.parse_args(argv if argv is not None else [])
    sizes = [int(s) for s in args.sizes.split(",")]
    medians: dict[str, dict[int, dict[str, float]]] = {}
    store_sizes = {}
    for n in sizes:
        rows, store_sizes[n] = _measure_size(n, max(3, args.repeats), args.before_up_to)
        for case, ways in rows.items():
            medians.setdefault(case, {})[n] = {way: median(v) for way, v in ways.items()}
    env = {"python -m vllm_plugin_release --version": _startup(args.repeats)}
    check_env = None if args.no_check_env else _check_env(max(3, args.repeats))
    return _report(medians, store_sizes, env, check_env)


def _startup(repeats: int) -> float:
    _, cpu = measured(lambda: _cli(installed_env(), "--version"), repeats, child=True)
    return median(cpu)


def _report(
    medians: dict[str, dict[int, dict[str, float]]],
    store_sizes: dict[int, dict[str, int]],
    startup: dict[str, float],
    check_env: dict[str, float] | None,
) -> dict[str, Any]:
    from rich.table import Table

    sizes = sorted(store_sizes)
    table = Table(title="store scale: median s, in process cpu / command cpu (wall)")
    table.add_column("case")
    for n in sizes:
        table.add_column(f"{n:,}", justify="right")
    table.add_column("slope in proc / cmd", justify="right")
    table.add_column(f"targets at {TARGET_AT:,}", justify="left")
    result: dict[str, Any] = {"sizes": store_sizes, "cases": {}, "startup_cpu_s": startup}
    for case, by_size in medians.items():
        cells = []
        for n in sizes:
            m = by_size.get(n)
            cells.append(
                f"{m['in process cpu']:.3f} / {m['command cpu']:.3f} ({m['command']:.2f})"
                if m
                else "-"
            )
        slopes = {
            way: slope([(n, m[way]) for n, m in sorted(by_size.items())])
            for way in ("in process cpu", "command cpu")
        }
        shown = " / ".join("-" if s is None else f"{s:.2f}" for s in slopes.values())
        table.add_row(case, *cells, shown, _verdict(case, by_size, slopes))
        result["cases"][case] = {"medians": by_size, "slopes": slopes}
    console.print(table)
    for case, data in result["cases"].items():  # the same, one line a case (logs, reports)
        figures = "; ".join(
            f"{n:,}: in process {m['in process cpu']:.3f} s, command {m['command cpu']:.3f} s"
            for n, m in sorted(data["medians"].items())
        )
        slopes = ", ".join(f"{way} {s:.2f}" for way, s in data["slopes"].items() if s is not None)
        print(f"{case}: {figures}; slope {slopes}", flush=True)
    limit = math.log10(TARGET_GROWTH)
    console.print(
        f"  growth target: 10x the pairings <= {TARGET_GROWTH}x the time, a slope <= "
        f"{limit:.2f} (every pairing's query and every ledger entry grow with their answer: shown, "
        "not judged)"
    )
    for label, seconds in startup.items():
        console.print(f"  {label}: {seconds:.3f} s CPU (start-up and CLI import)")
    for n, s in store_sizes.items():
        console.print(
            f"  {n:,} pairings: index.json {s['index_bytes'] / 1e6:.1f} MB, summary.json "
            f"{s['summary_json_bytes'] / 1e3:.1f} kB, "
            f"summary/ {s['summary_dir_bytes'] / 1e6:.1f} MB; ledger.jsonl "
            f"{s['ledger_bytes'] / 1e6:.1f} MB, ledger/summary.json "
            f"{s['ledger_summary_json_bytes'] / 1e3:.1f} kB"
        )
    if check_env:
        ok = check_env["in process"] <= TARGET_CHECK_ENV
        console.print(
            f"  check-env, 150 pins: in process {check_env['in process']:.3f} s (cpu "
            f"{check_env['in process cpu']:.3f}), command {check_env['command']:.3f} s (cpu "
            f"{check_env['command cpu']:.3f}); target {TARGET_CHECK_ENV} s: "
            f"{'met' if ok else 'MISSED'}"
        )
        result["check_env"] = check_env
    return result


def _verdict(
    case: str, by_size: dict[int, dict[str, float]], slopes: dict[str, float | None]
) -> str:
    m = by_size.get(TARGET_AT)
    parts = []
    if m:
        cmd, inproc = m["command cpu"], m["in process cpu"]
        parts.append(f"cmd {'met' if cmd <= TARGET_COMMAND_CPU else 'MISSED'}")
        parts.append(f"in proc {'met' if inproc <= TARGET_IN_PROCESS else 'MISSED'}")
    if not case.startswith(("query, every", "ledger, every")) and "before" not in case:
        worst = max((s for s in slopes.values() if s is not None), default=None)
        if worst is not None:
            growth = worst <= math.log10(TARGET_GROWTH)
            parts.append(f"growth {'met' if growth else 'MISSED'}")
    return ", ".join(parts)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=2, default=str))
