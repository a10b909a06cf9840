"""Issue 14's scale targets for a fleet's manifest store:

- `vpr manifest query` and `vpr manifest matrix` over a store of 10,000 pairings
  (generated: 2,000 core versions x 5 plugins, each entry with its wheels, lock and
  two history lines) in <= 0.5 s;
- `vpr manifest check-env` of a 150-pin environment (148 small real distributions
  plus the core and plugin, installed by uv into a venv) in <= 1 s.

Each figure is the median of several runs, measured two ways side by side: the
library call in this process (read index + query/matrix + render; probe + compare),
and the command end to end (`python -m vllm_plugin_release ...`, interpreter start-up
included). Both as wall time and as CPU time (this process, or the child's; the
probe child's included for check-env): on a shared machine the wall time also
counts waiting for a core, the CPU time does not. Printed, never asserted.

    python -m benchmarks.bench_store [--repeats 5] [--pairings 10000]
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, console, cpu_seconds, median, timed


def cpu_timed(fn: Any, repeats: int) -> list[float]:
    """CPU seconds of this process and its finished children, per run."""
    out = []
    for _ in range(repeats):
        before = cpu_seconds()
        fn()
        out.append(cpu_seconds() - before)
    return out


TARGETS = {"query": 0.5, "matrix": 0.5, "check-env": 1.0}


def _store(root: Path, n: int, plugins: int = 5) -> Path:
    """index.json of `n` pairings (as a publisher's rebuild writes it) in `root`."""
    sys.path.insert(0, str(REPO))
    from tests.pairing import built_manifest, manifest_variant
    from vllm_plugin_release.core import storeindex as si

    base = built_manifest(root / "dist")
    index = si.empty_index()
    for i in range(n):
        m = manifest_variant(base, commit=f"{i % plugins:040x}", core=f"0.{i // plugins}.0")
        m = copy.deepcopy(m)
        m["plugin"]["name"] = f"vllm-vendor-plugin-{i % plugins}"
        runs = [
            si.run_record(m, f"{i:064x}", f"2026-11-{1 + k:02d}T00:00:00Z", {"kind": "local"})
            for k in range(2)
        ]
        extras = {"runs": runs, "stored_wheels": {}, "lock": True}
        index["pairings"][m["pairing_id"]] = si.entry_for(m, f"{i:064x}", True, extras)
    store = root / "store"
    store.mkdir()
    (store / "index.json").write_bytes(si.index_bytes(index))
    from tests.pairing import sign_store

    sign_store(store, _key(root))  # consumers read a store through its signed head
    return store


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


def _cli(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "vllm_plugin_release", *args], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"vpr {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pairings", type=int, default=10_000)
    args = parser.parse_args(argv if argv is not None else [])
    from vllm_plugin_release.core import storeindex as si
    from vllm_plugin_release.core import storeview
    from vllm_plugin_release.edges import store as st
    from vllm_plugin_release.edges.trust import Trusted
    from vllm_plugin_release.stages import verify

    rows: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="vpr-bench-store-") as tmp:
        root = Path(tmp)
        store = _store(root, args.pairings)
        size = (store / "index.json").stat().st_size

        public = _key(root).public_key()

        def index() -> dict[str, Any]:  # through the signed head, as the commands read it
            return Trusted(st.DirStore(store), public, memory=None).index()

        def query() -> None:
            storeview.query_text(si.query(index()), str(store))

        def matrix() -> None:
            storeview.matrix_text(si.matrix(index()))

        python, manifest_path, lock = _env(root)
        manifest = json.loads(manifest_path.read_text())
        lock_text = lock.read_text()

        def check_env() -> None:
            problems = verify.check_environment(manifest, python, None, lock_text)
            assert not problems, problems

        n = args.repeats
        key = ["--key", str(root / "key.pub")]
        env_cli = ["manifest", "check-env", "--manifest", str(manifest_path), "--python",
                   str(python), "--lock", str(lock), *key]  # fmt: skip
        cases = {
            "query": (query, ["manifest", "query", "--store", str(store), *key]),
            "matrix": (matrix, ["manifest", "matrix", "--store", str(store), *key]),
            "check-env": (check_env, env_cli),
        }
        for case, (fn, argv) in cases.items():
            rows[case] = {
                "in process": timed(fn, n),
                "in process cpu": cpu_timed(fn, n),
                "command": timed(lambda argv=argv: _cli(*argv), n),
                "command cpu": cpu_timed(lambda argv=argv: _cli(*argv), n),
            }
        baseline = timed(lambda: _cli("--version"), n)
    return _report(rows, baseline, args.pairings, size)


def _report(
    rows: dict[str, dict[str, list[float]]], baseline: list[float], pairings: int, size: int
) -> dict[str, Any]:
    from rich.table import Table

    table = Table(title=f"store scale: {pairings} pairings (index.json {size / 1e6:.1f} MB); "
                  "check-env: 150 pins")  # fmt: skip
    for col in ("case", "in process s (cpu)", "command s (cpu)", "target s", "met in process"):
        table.add_column(col)
    result: dict[str, Any] = {"pairings": pairings, "index_bytes": size, "cases": {}}
    for case, ways in rows.items():
        m = {way: median(values) for way, values in ways.items()}
        target = TARGETS[case]
        table.add_row(
            case,
            f"{m['in process']:.3f} ({m['in process cpu']:.3f})",
            f"{m['command']:.3f} ({m['command cpu']:.3f})",
            f"{target}",
            f"wall {m['in process'] <= target}, cpu {m['in process cpu'] <= target}",
        )
        result["cases"][case] = {
            "in_process_s": m["in process"],
            "in_process_cpu_s": m["in process cpu"],
            "command_s": m["command"],
            "command_cpu_s": m["command cpu"],
            "target_s": target,
        }
    console.print(table)
    start = median(baseline)
    console.print(f"  `vpr --version` (interpreter start-up and CLI import): {start:.3f} s")
    for case, data in result["cases"].items():
        console.print(
            f"  {case}: command / start-up = {data['command_s'] / start:.2f}x; "
            f"in process / target = {data['in_process_s'] / data['target_s']:.2f}x"
        )
    result["startup_s"] = start
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=2))
