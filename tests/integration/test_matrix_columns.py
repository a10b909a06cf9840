"""`vpr matrix run` column by column on the synthetic core (tests/synthcore.py) served from a
loopback index: each column's record is written as it ends, a column that cannot be built is
recorded and the rest run, a killed run keeps its finished columns, the Python follows the
core's Requires-Python, and the records assembled alone give the same matrix.json."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import synthcore
from tests.support import Index, vpr

# version on the index -> (synthetic core commit, Requires-Python or None)
RELEASES = {
    "0.1.0": (1, None),
    "0.1.1": (3, ">=3.10"),
    "0.1.2": (4, None),  # listed with a wrong sha256 on the index
    "0.2.0": (8, ">=3.10"),
    "0.3.0": (8, ">=3.99"),  # no Python fits it
}
TEST = "tests.test_core_api::test_api_level"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("matrix")
    index = Index()
    for version, (number, requires) in RELEASES.items():
        index.files[f"vllm-{version}.tar.gz"] = synthcore.core_sdist(number, version, requires)
    index.listed_sha["vllm-0.1.2.tar.gz"] = "0" * 64
    sha = hashlib.sha256(index.files["vllm-0.2.0.tar.gz"]).hexdigest()
    spec = synthcore.project(
        root / "proj", synthcore.sdist_source(index.url, "0.2.0", sha), "0.2.0"
    )
    env = {"VPR_CACHE_DIR": str(root / ".vpr")}
    try:
        vpr("lock", "--spec", str(spec), cwd=root / "proj", env=env)
        vpr("build-plugin", "--spec", str(spec), cwd=root / "proj", env=env)
        yield {"proj": root / "proj", "spec": spec, "env": env}
    finally:
        index.close()


def _argv(setup, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vllm_plugin_release",
        "matrix",
        "run",
        "--spec",
        str(setup["spec"]),
        "--lowest",
        "0.1.0",
        *extra,
    ]


def _dist(setup) -> Path:
    return setup["proj"] / "dist" / "demo"


def test_a_killed_run_keeps_its_columns_and_failed_columns_are_recorded(setup) -> None:
    folder = _dist(setup) / "matrix"
    env = {**os.environ, **setup["env"]}
    # killed once the first column's record is written, mid-way through the second
    proc = subprocess.Popen(
        _argv(setup),
        cwd=setup["proj"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(1200):
            if (folder / "0.1.0.json").exists() or proc.poll() is not None:
                break
            time.sleep(0.25)
        assert (folder / "0.1.0.json").exists(), "the first column's record was never written"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    first = (folder / "0.1.0.json").read_bytes()
    assert not (_dist(setup) / "matrix.json").exists()

    done = subprocess.run(
        _argv(setup, "--json"),
        cwd=setup["proj"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr  # a regression, and columns not run
    assert "matrix: 0.1.0: reused its record" in done.stderr
    assert (folder / "0.1.0.json").read_bytes() == first
    m = json.loads(done.stdout)
    got = {c["core"]: c for c in m["columns"]}
    assert list(got) == ["0.1.0", "0.1.1", "0.1.2", "0.2.0", "0.3.0"]
    assert got["0.1.0"]["role"] == "lowest" and got["0.2.0"]["role"] == "pinned"
    # the wrong sha256 on the index: recorded with its reason and class, the rest ran
    bad = got["0.1.2"]
    assert bad["status"] == "not-run" and bad["exit_class"] in (1, 2), bad
    assert "sha256" in bad["reason"]
    # no Python fits 0.3.0: said, nothing built
    none = got["0.3.0"]
    assert none["status"] == "not-run" and none["python"] is None and none["exit_class"] == 2
    assert "accepts none of 3.11" in none["python_why"], none
    # the Python each tested column used, and why
    assert (
        got["0.1.1"]["python"] == "3.11" and "Requires-Python >=3.10" in got["0.1.1"]["python_why"]
    )
    # the regression is against the tested column before (0.1.1: 0.1.2 was not run)
    assert got["0.2.0"]["against"] == "0.1.1" and got["0.2.0"]["regressions"] == [TEST]
    # the plugin's stale module fails to import on every core: recorded per column
    assert "demo_plugin.stale" in got["0.1.0"]["imports"]
    # the coupling report names the import the cores never define as breaking
    ids = [c["id"] for c in (got["0.1.1"]["coupling"] or {}).get("changes", [])]
    assert got["0.1.1"]["coupling"]["against"] == "0.1.0"
    assert any("NoSuchLauncher" in i for i in ids), ids
    # the column before 0.2.0 could not be fetched: its report is against the nearest
    # earlier core that could, and its tests ran
    assert got["0.2.0"]["coupling"]["against"] == "0.1.1" and got["0.2.0"]["status"] == "tested"
    md = (_dist(setup) / "matrix.md").read_text()
    assert "| 0.3.0 | release | none | not run (exit 2)" in md
    assert f"`{TEST}`" in md

    # assembled from the records alone (a CI matrix's last job): the same bytes
    whole = (_dist(setup) / "matrix.json").read_bytes()
    (_dist(setup) / "matrix.json").unlink()
    again = vpr(
        "matrix",
        "assemble",
        "--spec",
        str(setup["spec"]),
        cwd=setup["proj"],
        env=setup["env"],
        check=False,
    )
    assert again.returncode == 1, again.stderr
    assert (_dist(setup) / "matrix.json").read_bytes() == whole


def test_the_columns_go_to_the_ledger_once(setup) -> None:
    """`vpr matrix run --store`: an entry of kind matrix per column (the records reused), a
    second run adds none; `vpr manifest ledger` reads them back verified."""
    store = setup["proj"] / "store"
    first = vpr(*_argv(setup, "--store", str(store))[3:], cwd=setup["proj"], env=setup["env"],
                check=False)  # fmt: skip
    assert first.returncode == 1, first.stderr
    assert "ledger: 5 matrix entries (#1..#5)" in first.stderr
    again = vpr(*_argv(setup, "--store", str(store))[3:], cwd=setup["proj"], env=setup["env"],
                check=False)  # fmt: skip
    assert "ledger: 0 matrix entries (none)" in again.stderr
    assert "5 column(s) already recorded" in again.stderr
    shown = vpr("manifest", "ledger", "--store", str(store), "--kind", "matrix", "--json",
                cwd=setup["proj"], env=setup["env"])  # fmt: skip
    entries = json.loads(shown.stdout)
    assert [e["core"]["version"] for e in entries] == ["0.1.0", "0.1.1", "0.1.2", "0.2.0", "0.3.0"]
    assert [e["verdict"] for e in entries] == ["fail", "fail", "not-run", "regressed", "not-run"]
    assert {e["plugin"]["name"] for e in entries} == {"demo-plugin"}
    assert entries[3]["column"]["against"] == "0.1.1"


def test_one_column_as_a_ci_job_and_a_hostile_record(setup) -> None:
    folder = _dist(setup) / "matrix"
    done = vpr(
        *_argv(setup, "--only", "0.1.1")[3:], cwd=setup["proj"], env=setup["env"], check=False
    )
    assert done.returncode == 0, done.stderr
    assert "0.1.1: reused its record" in done.stderr  # its inputs did not change
    wrong = vpr(
        *_argv(setup, "--only", "9.9.9")[3:], cwd=setup["proj"], env=setup["env"], check=False
    )
    assert wrong.returncode == 2 and "not a column of this matrix" in wrong.stderr
    # a record that is not one: named, exit 2, no traceback
    (folder / "0.1.1.json").write_text('{"schema": 1, "core": "../../etc"}')
    bad = vpr(
        "matrix",
        "assemble",
        "--spec",
        str(setup["spec"]),
        cwd=setup["proj"],
        env=setup["env"],
        check=False,
    )
    assert bad.returncode == 2 and "0.1.1.json: not a column record" in bad.stderr
    assert "Traceback" not in bad.stderr
