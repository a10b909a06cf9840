"""A spec whose build Python this machine cannot run: `vpr conform` runs the checks that
need no pairing environment (cadence, isolation on the verified source tree, pinning),
defers the others with the missing interpreter named, writes a `lab` scorecard and
exits 3. `vpr release --spec buildspec/tt.toml` (CPython 3.10) does the same at
build-core where this machine has no CPython 3.10."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.required import tt_checkout
from tests.support import REFERENCE_SPEC, REPO, vpr
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform.registry import SUITE, applicable
from vllm_plugin_release.conform.suite import env_free

ABSENT = "3.19"  # a CPython no machine has yet


def absent_python_spec(tmp_path: Path, symbols: list[str] | None = None) -> Path:
    """buildspec/reference.toml asking for CPython 3.19 (its paths made absolute)."""
    text = REFERENCE_SPEC.read_text()
    old = 'python = "3.11"'
    assert old in text
    text = text.replace(old, f'python = "{ABSENT}"', 1)
    text = text.replace('"plugin/reference', f'"{REPO}/plugin/reference')
    text = text.replace('"constraints/', f'"{REPO}/constraints/')
    if symbols is not None:
        head, sep, tail = text.partition("[conformance.isolation]\n")
        assert sep, "the reference spec has an isolation table"
        rest = tail.split("\n[", 1)[1]
        text = f"{head}{sep}symbols = {json.dumps(symbols)}\n\n[{rest}"
    spec = tmp_path / "buildspec" / "absent.toml"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(text)
    return spec


def conform(spec: Path, dist: Path, cache_root: Path) -> subprocess.CompletedProcess:
    args = ("conform", "--spec", str(spec), "--dist", str(dist), "--cache-dir", str(cache_root))
    return vpr(*args, check=False)


def split_suite(spec: Path) -> tuple[set[str], set[str]]:
    """(env-free checks, checks that read the pairing env) of the suite `vpr conform` runs
    for `spec`, as the registry says (api has no recorded 0.26.0 contract here, so it is
    deferred with the latter)."""
    names = set(applicable(load_spec(spec), SUITE))
    free = {n for n in names if env_free(n)}
    assert {"cadence", "isolation", "pinning"} <= free
    assert {"scheduler", "api", "environment", "plugin_tests"} <= names - free
    return free, names - free


def test_conform_without_the_spec_python_runs_the_env_free_checks(
    tmp_path: Path, cache_root: Path
) -> None:
    spec = absent_python_spec(tmp_path)
    env_free_checks, env_checks = split_suite(spec)
    done = conform(spec, tmp_path / "dist", cache_root)
    assert done.returncode == 3, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert f"no CPython {ABSENT} interpreter on this machine" in done.stderr
    assert f"pyenv install {ABSENT}" in done.stderr  # how to get it, without GitHub
    assert "searched:" in done.stderr and "pyenv (" in done.stderr  # where it looked
    card = json.loads((tmp_path / "dist" / "reference" / "scorecard.json").read_text())
    assert card["verdict"] == "lab"
    assert f"no CPython {ABSENT}" in card["blocked"]["reason"]
    statuses = {name: check["status"] for name, check in card["checks"].items()}
    assert {n for n, s in statuses.items() if s != "deferred"} == env_free_checks
    assert statuses["isolation"] == "pass"  # vLLM core names no reference vendor symbol
    isolation = card["checks"]["isolation"]
    assert "source tree only" in isolation["summary"]
    assert any("core wheel not scanned" in e["note"] for e in isolation["evidence"])
    assert set(isolation["details"]["scans"]) == {"core-tree"}
    for name in env_checks:
        assert f"no CPython {ABSENT}" in card["checks"][name]["summary"], name
    assert {d["check"] for d in card["deferred"]} >= env_checks
    assert not (tmp_path / "dist" / "reference" / "build-core.json").exists()


def test_env_free_isolation_still_fails_on_a_vendor_symbol(
    tmp_path: Path, cache_root: Path
) -> None:
    """Known-bad: a symbol vLLM core really uses (`cuda`) fails isolation on the tree."""
    spec = absent_python_spec(tmp_path, symbols=["cuda"])
    done = conform(spec, tmp_path / "dist", cache_root)
    assert done.returncode == 3, done.stderr[-3000:]
    card = json.loads((tmp_path / "dist" / "reference" / "scorecard.json").read_text())
    assert card["checks"]["isolation"]["status"] == "fail"
    assert card["verdict"] == "lab"


def test_release_without_the_spec_python_still_runs_the_env_free_checks(
    tmp_path: Path, cache_root: Path
) -> None:
    """`vpr release` stops at its first gate, here the lock (written for 3.11, so stale
    for 3.19: exit 2, its own error), and the env-free checks ran all the same."""
    spec = absent_python_spec(tmp_path)
    dist = tmp_path / "dist"
    args = ("--spec", str(spec), "--no-publish", "--dist", str(dist))
    done = vpr("release", *args, "--cache-dir", str(cache_root), check=False)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "lock is stale" in done.stderr
    assert f"no CPython {ABSENT} interpreter on this machine" in done.stderr
    assert "Traceback" not in done.stderr
    card = json.loads((dist / "reference" / "scorecard.json").read_text())
    assert card["verdict"] == "lab"
    ran = {n for n, c in card["checks"].items() if c["status"] != "deferred"}
    assert ran == split_suite(spec)[0]
    run = json.loads((dist / "reference" / "run.json").read_text())
    assert run["release"]["failed_stage"] == "lock"


@tt_checkout(may_skip="this machine has CPython 3.10 where it cannot be hidden")
def test_tt_release_without_cpython_310_runs_the_env_free_checks(
    tmp_path: Path, cache_root: Path
) -> None:
    """tt builds for 3.10: with its build lock committed the run stops at build-core, or at
    env with the wheels cached (exit 3), without it at the lock (exit 2); either way the
    env-free checks ran. The machine's own 3.10 (pyenv, asdf, mise, uv's) is hidden: every
    place vpr looks is empty."""
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    places = ("PYENV_ROOT", "ASDF_DATA_DIR", "MISE_DATA_DIR", "UV_PYTHON_INSTALL_DIR")
    hidden = {name: str(nowhere) for name in places}
    found = subprocess.run(
        ["uv", "python", "find", "--system", "--no-python-downloads", "3.10"],
        capture_output=True, env={**os.environ, **hidden}, check=False,
    )  # fmt: skip
    if found.returncode == 0 or Path("/usr/bin/python3.10").exists():
        pytest.skip("this machine has CPython 3.10 where it cannot be hidden (PATH, /usr/bin)")
    dist = tmp_path / "dist"
    done = vpr(
        "release",
        "--spec",
        str(REPO / "buildspec" / "tt.toml"),
        "--plugin-source",
        os.environ["VPR_TT_PLUGIN_CHECKOUT"],
        "--no-publish",
        "--dist",
        str(dist),
        "--cache-dir",
        str(cache_root),
        env=hidden,
        check=False,
    )
    locked = (REPO / "constraints" / "build-core-py310.txt").is_file()
    assert done.returncode == (3 if locked else 2), done.stderr[-3000:]
    assert "no CPython 3.10 interpreter on this machine" in done.stderr
    assert "Traceback" not in done.stderr
    card = json.loads((dist / "tt" / "scorecard.json").read_text())
    assert card["verdict"] == "lab"
    ran = {n for n, c in card["checks"].items() if c["status"] != "deferred"}
    assert ran == split_suite(REPO / "buildspec" / "tt.toml")[0]
    run = json.loads((dist / "tt" / "run.json").read_text())
    # at build-core, or at env where the core wheel is cached (wheels do not depend on
    # where the interpreter lives, so a cached one is reused without it)
    stops = ("build-core", "env") if locked else ("lock",)
    assert run["release"]["failed_stage"] in stops
