"""Issue 31's target: vpr-guard adds at most 50 ms to vLLM's start-up.

The reference pairing is released (the shared cache: `$VPR_CACHE_DIR`, else `.vpr/`),
published to a store of its own and installed with `vpr install` (the guard and the
verified manifest beside the environment). Then the issue's command,

    python -c "import vllm; from vllm.plugins import load_general_plugins; load_general_plugins()"

runs in that environment with and without the guard, interleaved so both see the same load:
with it (VPR_GUARD=enforce: the whole check runs), and without it (VLLM_PLUGINS names the
pairing's own plugins only, so vLLM never loads the guard's entry point; nothing else
differs). Each run also times `load_general_plugins()` inside the process, where the guard
runs: on a shared machine `import vllm` alone moves by seconds from one run to the next, so
the added time is read there (median with - median without); the whole command's medians are
shown beside it. The guard's own time (VPR_GUARD_TIMING) is the third figure.

    python -m benchmarks.bench_guard [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, console, installed_env, median, report

TARGET = 0.050  # seconds added to vLLM's start-up
SPEC = str(REPO / "buildspec" / "reference.toml")
START = (
    "import json, time; t0 = time.perf_counter(); import vllm; "
    "from vllm.plugins import load_general_plugins; t1 = time.perf_counter(); "
    "load_general_plugins(); t2 = time.perf_counter(); "
    "print('BENCH ' + json.dumps({'import': t1 - t0, 'plugins': t2 - t1}))"
)
WITHOUT = {"VLLM_PLUGINS": "reference,reference_model_aliases"}  # the plugin's own entry points


def _vpr(*args: str, cache: Path) -> str:
    env = installed_env({**os.environ, "VPR_CACHE_DIR": str(cache)})
    done = subprocess.run([sys.executable, "-m", "vllm_plugin_release", *args], cwd=REPO,
                          env=env, capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"vpr {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def guarded_env(work: Path) -> Path:
    """The reference pairing released, published to `work`/store and installed in
    `work`/venv with `vpr install`; its python."""
    shared = Path(os.environ.get("VPR_CACHE_DIR") or REPO / ".vpr")
    own = work / "cache"
    dist, key = work / "dist", work / "keys" / "bench.key"
    _vpr("keys", "generate", "--out", str(key), cache=own)
    signed = ("--spec", SPEC, "--dist", str(dist), "--signing-key", str(key))
    console.print("bench guard: vpr release (warm where the cache has the pairing)")
    _vpr("release", *signed, "--no-publish", cache=shared)
    _vpr("publish", *signed, "--store", str(work / "store"), cache=own)
    pid = json.loads((dist / "reference" / "manifest.json").read_text())["pairing_id"]
    _vpr("install", pid[:12], "--store", str(work / "store"), "--key", f"{key}.pub",
         "--python-env", str(work / "venv"), "--offline", cache=own)  # fmt: skip
    return work / "venv" / "bin" / "python"


def start(python: Path, guard: bool) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("VPR_GUARD", "VLLM_PLUGINS")}
    env.update({"VPR_GUARD": "enforce", "VPR_GUARD_TIMING": "1"} if guard else WITHOUT)
    begin = time.perf_counter()
    done = subprocess.run([str(python), "-c", START], env=env, cwd=python.parent,
                          capture_output=True, text=True, check=False)  # fmt: skip
    wall = time.perf_counter() - begin
    if done.returncode != 0:
        raise SystemExit(f"vLLM did not start (guard {guard}):\n{done.stderr[-3000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("BENCH "))
    out = {"wall": wall, **json.loads(line[len("BENCH ") :])}
    check = [x for x in done.stderr.splitlines() if x.startswith("vpr-guard: check took ")]
    if guard:
        if not check:
            raise SystemExit("the guard did not run (no 'vpr-guard: check took' line)")
        out["check"] = float(check[0].split()[3])
    elif check:
        raise SystemExit("the guard ran in the run without it")
    return out


def main(repeats: int = 7) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-guard-"))
    python = guarded_env(work)
    start(python, True), start(python, False)  # warm both: bytecode, page cache
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for i in range(repeats):
        for guard in (True, False) if i % 2 == 0 else (False, True):
            runs[guard].append(start(python, guard))

    def series(guard: bool, key: str) -> list[float]:
        return [r[key] for r in runs[guard]]

    result = report(
        "vLLM start-up with and without vpr-guard (reference pairing, vpr install)",
        {
            "whole command, with the guard": series(True, "wall"),
            "whole command, without": series(False, "wall"),
            "load_general_plugins(), with the guard": series(True, "plugins"),
            "load_general_plugins(), without": series(False, "plugins"),
            "the guard's check alone (VPR_GUARD_TIMING)": series(True, "check"),
        },
        [],
    )
    added = median(series(True, "plugins")) - median(series(False, "plugins"))
    whole = median(series(True, "wall")) - median(series(False, "wall"))
    result.update({"added_s": added, "check_s": median(series(True, "check")),
                   "whole_added_s": whole, "target_s": TARGET, "work": str(work)})  # fmt: skip
    console.print(f"whole command, median with - median without: {whole * 1000:.0f} ms "
                  "(import vllm's own spread on this machine is larger)")  # fmt: skip
    verdict = "meets" if added <= TARGET else "MISSES"
    console.print(f"added to start-up: {added * 1000:.1f} ms (target <= 50 ms): {verdict}")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=7)
    main(parser.parse_args().repeats)
