"""The performance target: verifying a store entry before use (the store's signed
head, the index it vouches for, the manifest's signature and its match to the request, the
ledger's newest verdict) adds at most 10% to `vpr install` of a warm pairing (the
environment already matches: nothing to install).

Two measures, each the median of several runs (wall and CPU time: on a shared machine the
wall time also counts waiting for a core, the CPU time does not):

- side by side, end to end: `vpr install` of the same warm pairing from the same store
  into the same environment, by this code and by the code before the trust path (the
  parent of the commit that added `edges/trust.py`, unpacked with `git archive`; `--base`
  picks another), runs interleaved so both see the same load;
- in process: the verification part alone (what `install` does before it probes the
  environment) against the whole warm `install()`.

The store is made in process (no package index): two pairings' files, the pairing's lock
and wheels, and a ledger of `--ledger` entries (the ledger is read and verified in full).

    python -m benchmarks.bench_install [--repeats 7] [--ledger 200] [--base REV]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, base_commit, console, cpu_seconds, installed_env, median

TARGET = 1.10  # verified / before, end to end
FIRST_FILE = "src/vllm_plugin_release/core/bounded.py"  # base: the commit before it was added


def unpack(rev: str, into: Path) -> Path:
    """`src/` of `rev` in `into`; the folder to put on PYTHONPATH."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "src"], cwd=REPO, capture_output=True, check=True
    ).stdout
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _project(root: Path, ledger_entries: int) -> dict[str, Any]:
    """A store holding one installable pairing (lock + wheels) and a ledger; its key."""
    sys.path.insert(0, str(REPO))
    from tests.pairing import locked_project, make_pairing, vpr, write_spec
    from vllm_plugin_release.core import ledger, manifestmodel
    from vllm_plugin_release.core.storeindex import PublishedAt
    from vllm_plugin_release.edges import keys, trust
    from vllm_plugin_release.edges.store import DirStore, Extras

    deps = locked_project(root)
    lock = root / "constraints" / "env-py311.txt"
    spec = write_spec(root)
    dist = root / "dist" / "ref"
    make_pairing(dist)
    done = vpr("manifest", "build", "--spec", str(spec), cwd=root)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    key_path = root / ".vpr" / keys.DEFAULT_KEY
    key = keys.load_private_key(key_path)
    store = DirStore(root / "store", signer=key)
    manifest = json.loads((dist / "manifest.json").read_text())
    wheels = tuple(dist / manifest[r]["wheel"]["filename"] for r in ("core", "plugin"))
    extras = Extras(lock=lock.read_bytes(), wheels=wheels, index=PublishedAt("local"))
    store.add(dist / "manifest.json", dist / "manifest.intoto.jsonl", extras)
    digest = hashlib.sha256((dist / "manifest.json").read_bytes()).hexdigest()
    typed = manifestmodel.parse(manifest, str(dist / "manifest.json"))
    entry = ledger.entry_from_manifest(typed, manifest_sha256=digest, runner="cpu",
                                       time="2026-12-01T00:00:00Z")  # fmt: skip
    for i in range(ledger_entries - 1):  # other pairings' verdicts, then this one's
        other = dataclasses.replace(entry, pairing_id=f"{i:064x}", manifest_sha256=f"{i:064x}")
        trust.append(store, other, key)
    trust.append(store, entry, key)
    env = {**installed_env(), "VPR_FIND_LINKS": str(deps), "VPR_CACHE_DIR": str(root / ".vpr")}
    return {
        "root": root,
        "store": store.root,
        "pid": manifest["pairing_id"],
        "public": f"{key_path}.pub",
        "env": env,
    }


def _install_argv(p: dict[str, Any], venv: Path) -> list[str]:
    return [sys.executable, "-m", "vllm_plugin_release", "install", p["pid"][:12], "--store",
            str(p["store"]), "--python-env", str(venv), "--key", p["public"], "--offline",
            "--json"]  # fmt: skip


def _timed_install(p: dict[str, Any], venv: Path, src: Path, status: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one `vpr install` by the code in `src` (CPU: the command and
    its children, the environment probe included)."""
    env = {**p["env"], "PYTHONPATH": str(src)}
    start, cpu = time.perf_counter(), cpu_seconds(own=False)
    done = subprocess.run(_install_argv(p, venv), env=env, cwd=p["root"], capture_output=True,
                          text=True, check=False)  # fmt: skip
    took = (time.perf_counter() - start, cpu_seconds(own=False) - cpu)
    if done.returncode != 0 or json.loads(done.stdout)["status"] != status:
        raise SystemExit(f"install with {src} failed:\n{done.stdout}\n{done.stderr[-3000:]}")
    return took


def _in_process(p: dict[str, Any], venv: Path, repeats: int) -> dict[str, list[float]]:
    """The verification part alone and the whole warm install(), in this process."""
    from vllm_plugin_release.core import storeindex as si
    from vllm_plugin_release.edges import keys
    from vllm_plugin_release.edges.store import DirStore
    from vllm_plugin_release.edges.trust import Trusted
    from vllm_plugin_release.flows import install as fi

    public = keys.load_public_key(Path(p["public"]))
    request = fi.Request(pairing=p["pid"][:12])
    target = fi.Target(env_dir=venv, scratch=p["root"] / ".vpr" / "tmp", offline=True)

    def verification() -> None:
        trusted = Trusted(DirStore(p["store"]), public, memory=None)
        entry = fi.pick(trusted.index(), request.pairing, None, None)
        manifest = fi.verified_pairing(trusted, entry, request).manifest
        lock_at = si.lock_path(entry.pairing_id)
        si.check_lock(manifest, trusted.store.read_bytes(lock_at), lock_at)

    def whole() -> None:
        result = fi.install(Trusted(DirStore(p["store"]), public, memory=None), request, target)
        assert result.status == "unchanged"

    out: dict[str, list[float]] = {"verification": [], "whole install": []}
    for _ in range(repeats):
        for name, fn in (("verification", verification), ("whole install", whole)):
            start = time.perf_counter()
            fn()
            out[name].append(time.perf_counter() - start)
    return out


def main(repeats: int = 7, ledger_entries: int = 200, base: str | None = None) -> dict[str, Any]:
    rev = base_commit(base, FIRST_FILE)
    with tempfile.TemporaryDirectory(prefix="vpr-bench-install-") as tmp:
        root = Path(tmp)
        old_src = unpack(rev, root / "before")
        p = _project(root / "project", ledger_entries)
        venv = root / "venv"
        _timed_install(p, venv, REPO / "src", "installed")  # cold, once: the env is then warm
        cases = [("before", old_src), ("verified", REPO / "src")]
        unreadable = _refused(p, venv, old_src)
        if unreadable:  # the code before cannot read this code's store: no pair to measure
            console.print(f"[yellow]  the code before ({rev}) refuses this store: {unreadable}")
            cases = cases[1:]
        rows: dict[str, list[float]] = {}
        for i in range(repeats):  # interleaved, in turn first: both see the same load
            for name, src in cases[:: 1 if i % 2 else -1]:
                wall, cpu = _timed_install(p, venv, src, "unchanged")
                rows.setdefault(name, []).append(wall)
                rows.setdefault(f"{name} cpu", []).append(cpu)
        inner = _in_process(p, venv, repeats)
    return _report(rows, inner, rev, ledger_entries, unreadable)


def _refused(p: dict[str, Any], venv: Path, src: Path) -> str | None:
    """None when the code in `src` installs from this store, else its error's first line
    (a store whose manifests' schema_version is newer than that code reads)."""
    try:
        _timed_install(p, venv, src, "unchanged")
    except SystemExit as exc:
        lines = [line for line in str(exc).splitlines()[1:] if line.startswith("vpr error")]
        return (lines or ["it failed"])[0].split(": ", 1)[-1]
    return None


def _report(
    rows: dict[str, list[float]],
    inner: dict[str, list[float]],
    rev: str,
    ledger_entries: int,
    unreadable: str | None = None,
) -> dict[str, Any]:
    from rich.table import Table

    table = Table(title=f"vpr install of a warm pairing (ledger of {ledger_entries} entries)")
    for col in ("case", "median s", "runs"):
        table.add_column(col)
    for name, values in {**rows, **{f"in process: {k}": v for k, v in inner.items()}}.items():
        table.add_row(name, f"{median(values):.3f}", " ".join(f"{v:.3f}" for v in values))
    console.print(table)
    share = median(inner["verification"]) / median(inner["whole install"])
    ratios: dict[str, Any] = {
        "verification / whole install": {"ratio": share, "target": None, "met": None},
    }
    if unreadable is None:
        ratio = median(rows["verified"]) / median(rows["before"])
        cpu = median(rows["verified cpu"]) / median(rows["before cpu"])
        ok = "meets" if ratio <= TARGET else "MISSES"
        console.print(f"  end to end, verified / before ({rev}): {ratio:.3f}x (target <= "
                      f"{TARGET}x: {ok}); CPU time {cpu:.3f}x")  # fmt: skip
        ratios["verified / before"] = {"ratio": ratio, "target": TARGET, "met": ratio <= TARGET}
        ratios["verified / before, cpu"] = {"ratio": cpu, "target": None, "met": None}
    else:
        console.print(f"  end to end, verified / before: n/a (the code before refuses the store: "
                      f"{unreadable})")  # fmt: skip
    console.print(f"  in process, verification / whole warm install: {share:.3f}")
    return {
        "base": rev,
        "before_refuses": unreadable,
        "ledger_entries": ledger_entries,
        "medians": {k: median(v) for k, v in rows.items()},
        "in_process_medians": {k: median(v) for k, v in inner.items()},
        "ratios": ratios,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--ledger", type=int, default=200)
    parser.add_argument("--base", default=None, help="the code before (default: see above)")
    args = parser.parse_args()
    print(json.dumps(main(args.repeats, args.ledger, args.base), indent=2))
