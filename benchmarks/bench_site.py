"""The site target: `vpr manifest site` renders a store of the reference, Ascend and
Spyre pairings and a synthetic store of 1,000 pairings in <= 2 s each.

- the real store: the reference pairing released here (`vpr release --no-publish`, the
  shared cache), and the Ascend and Spyre pairings from `$VPR_BENCH_DISTS` (default
  `dist/`: folders `ascend/` and `spyre/` as `vpr release` leaves them; missing ones are
  said and left out), each signed again with the bench's key (`vpr manifest build`) and
  published to one store (`--allow-uncertified`: they are lab on this machine);
- the synthetic store: 1,000 signed pairings over 50 core versions, 10 plugins and two
  Pythons, a ledger entry each and a hardware verdict for every tenth
  (tests/sitestore.py, written as the store's writers write it).

Each is measured two ways, medians of several runs: in process (read through the signed
head, every signature checked, render, write the folder) and the command end to end
(`python -m vllm_plugin_release manifest site`, interpreter start-up included).

    python -m benchmarks.bench_site [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, console, installed_env, report, timed

TARGET = 2.0


def _vpr(*args: str, cache: Path) -> None:
    env = installed_env({**os.environ, "VPR_CACHE_DIR": str(cache)})
    done = subprocess.run([sys.executable, "-m", "vllm_plugin_release", *args], cwd=REPO,
                          env=env, capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"vpr {' '.join(args)} failed:\n{done.stderr[-3000:]}")


def real_store(work: Path, key: Path) -> tuple[Path, list[str]]:
    """The reference pairing and the Ascend and Spyre pairings found, in one store."""
    shared = Path(os.environ.get("VPR_CACHE_DIR") or REPO / ".vpr")
    own, dist, store = work / "cache", work / "dist", work / "store"
    signing = ("--signing-key", str(key))
    _vpr("release", "--spec", str(REPO / "buildspec/reference.toml"), "--dist", str(dist),
         "--no-publish", *signing, cache=shared)  # fmt: skip
    names = ["reference"]
    found = Path(os.environ.get("VPR_BENCH_DISTS") or REPO / "dist")
    for name in ("ascend", "spyre"):
        if not (found / name / "build-core.json").is_file():
            console.print(f"[yellow]bench site: no {found / name}: the store has no {name}")
            continue
        shutil.copytree(found / name, dist / name)
        (dist / name / "manifest.json").unlink(missing_ok=True)
        _vpr("manifest", "build", "--spec", str(REPO / f"buildspec/{name}.toml"), "--dist",
             str(dist), *signing, cache=shared)  # fmt: skip
        names.append(name)
    for name in names:
        _vpr("publish", "--spec", str(REPO / f"buildspec/{name}.toml"), "--dist", str(dist),
             "--store", str(store), "--allow-uncertified", "--no-verify-install", *signing,
             cache=own)  # fmt: skip
    return store, names


def _measure(store: Path, public: Path, out: Path, repeats: int) -> dict[str, list[float]]:
    from vllm_plugin_release.edges.keys import load_public_key
    from vllm_plugin_release.edges.store import open_store
    from vllm_plugin_release.edges.trust import Trusted
    from vllm_plugin_release.flows.site import site

    key = load_public_key(public)

    def in_process() -> None:
        site(Trusted(open_store(str(store)), key, memory=None), out)

    def command() -> None:
        args = ["manifest", "site", "--store", str(store), "--key", str(public), "--out", str(out),
                "--newest-from", "store"]  # fmt: skip
        _vpr(*args, cache=out.parent / "cache-cli")

    in_process()  # warm: the page cache, bytecode
    return {"in process": timed(in_process, repeats), "vpr manifest site": timed(command, repeats)}


def main(repeats: int = 5) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    from tests.sitestore import synthetic
    from vllm_plugin_release.edges import keys

    work = Path(tempfile.mkdtemp(prefix="bench-site-"))
    key = work / "keys" / "bench.key"
    keys.generate_keypair(key)
    public = Path(f"{key}.pub")
    store, names = real_store(work / "real", key)
    real = _measure(store, public, work / "real" / "site", repeats)
    rows = {f"{k}, {'+'.join(names)}": v for k, v in real.items()}
    big = synthetic(work / "synthetic", keys.load_private_key(key))
    many = _measure(big, public, work / "synthetic" / "site", repeats)
    rows.update({f"{k}, 1,000 pairings": v for k, v in many.items()})
    result = report("vpr manifest site: render the compatibility site (medians)", rows, [])
    medians = result["medians"]
    result["real_s"] = medians[f"vpr manifest site, {'+'.join(names)}"]
    result["synthetic_s"] = medians["vpr manifest site, 1,000 pairings"]
    result["synthetic_in_process_s"] = medians["in process, 1,000 pairings"]
    result["stores"] = {"real": names, "work": str(work)}
    figures = (("real store", result["real_s"]), ("1,000 pairings", result["synthetic_s"]))
    for label, value in figures:
        verdict = "meets" if value <= TARGET else "MISSES"
        console.print(f"{label}: {value:.2f} s end to end (target <= {TARGET} s): {verdict}")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=5)
    main(parser.parse_args().repeats)
