"""`vpr bisect` end to end on a synthetic core with a known breaking commit (tests/synthcore.py):
over its git history and over its published versions on a loopback index, each probe built
through the real build-core stage, a real pairing environment and the plugin's real tests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests import synthcore
from tests.support import Index, vpr
from vllm_plugin_release.core import schedule
from vllm_plugin_release.edges import keys, trust
from vllm_plugin_release.edges.store import DirStore

# The plugin's stale module imports a name no core defines: a breaking change of every
# bump (missing in the old core too), approved on record to get to the bisection.
APPROVE = (
    "--approve-by",
    "Release Eng <re@example.com>",
    "--approve-why",
    "demo_plugin.stale never imported; left as is",
    "--approve",
    "missing:vllm.NoSuchLauncher",
)
# version on the index -> the synthetic core commit it was cut from (1-based)
RELEASES = {"0.1.0": 1, "0.1.1": 3, "0.2.0rc1": 4, "0.2.0rc2": 5, "0.2.0": 8}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("bisect")
    commits = synthcore.core_repo(root / "core")
    index = Index()
    for version, number in RELEASES.items():
        index.files[f"vllm-{version}.tar.gz"] = synthcore.core_sdist(number, version)
    sha = hashlib.sha256(index.files["vllm-0.2.0.tar.gz"]).hexdigest()
    spec = synthcore.project(
        root / "proj", synthcore.sdist_source(index.url, "0.2.0", sha), "0.2.0"
    )
    env = {"VPR_CACHE_DIR": str(root / ".vpr")}
    proj = root / "proj"
    try:
        vpr("lock", "--spec", str(spec), cwd=proj, env=env)
        vpr("build-plugin", "--spec", str(spec), cwd=proj, env=env)
        yield {
            "root": root,
            "proj": proj,
            "spec": spec,
            "env": env,
            "commits": commits,
            "index": index,
        }
    finally:
        index.close()


def _bisect(setup, *args: str):
    return vpr(
        "bisect",
        "--spec",
        str(setup["spec"]),
        *args,
        cwd=setup["proj"],
        env=setup["env"],
        check=False,
    )


def test_bisect_finds_the_breaking_commit(setup) -> None:
    commits = setup["commits"]
    core = str(setup["root"] / "core")
    done = _bisect(setup, "--repo", core, "--good", "v0.1.0", "--bad", "v0.2.0")
    assert done.returncode == 0, done.stdout + done.stderr
    dist = setup["proj"] / "dist" / "demo"
    report = json.loads((dist / "bisect.json").read_text())
    breaking = commits[synthcore.BREAKING - 1]
    assert report["mode"] == "git" and report["candidates"] == synthcore.COMMITS
    assert report["first_bad"]["candidate"] == breaking
    assert report["last_good"] == commits[synthcore.BREAKING - 2]
    assert report["first_bad"]["subject"] == f"change {synthcore.BREAKING}"
    assert report["watched"] == ["tests.test_core_api::test_api_level"]
    assert report["first_bad"]["failing"] == report["watched"]
    lines = report["first_bad"]["errors"]["tests.test_core_api::test_api_level"]
    assert "has no attribute 'api_level'" in lines[0]
    assert len(report["steps"]) <= 3  # log2(8) probes between the ends
    md = (dist / "bisect.md").read_text()
    assert f"First bad commit: `{breaking}` change 5" in md
    assert f"First bad commit: `{breaking}`" in done.stdout


def test_bisect_over_published_versions(setup) -> None:
    done = _bisect(setup, "--good", "0.1.0", "--bad", "0.2.0", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["mode"] == "index"
    assert report["candidates"] == len(RELEASES)
    assert report["first_bad"]["candidate"] == "0.2.0rc2"  # cut from the breaking commit
    assert report["last_good"] == "0.2.0rc1"
    # final releases only: the break is narrowed to the release that first ships it
    done = _bisect(setup, "--good", "0.1.0", "--bad", "0.2.0", "--json", "--final-only")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["first_bad"]["candidate"] == "0.2.0"


def test_bisect_refuses_a_failing_good_end_and_a_passing_bad_end(setup) -> None:
    commits = setup["commits"]
    core = str(setup["root"] / "core")
    done = _bisect(setup, "--repo", core, "--good", commits[5], "--bad", "v0.2.0")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the good end already fails every test that fails at --bad" in " ".join(
        (done.stdout + done.stderr).split()
    )
    done = _bisect(setup, "--repo", core, "--good", "v0.1.0", "--bad", commits[2])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the bad end passes" in " ".join((done.stdout + done.stderr).split())
    assert "Traceback" not in done.stderr


def test_nightly_moves_the_last_known_good_pointer_and_backs_off(setup, tmp_path: Path) -> None:
    commits = setup["commits"]
    core = str(setup["root"] / "core")
    store = tmp_path / "store"
    key = tmp_path / "keys" / "m.key"
    vpr("keygen", "--out", str(key))
    common = ["nightly", "--spec", str(setup["spec"]), "--repo", core, "--store", str(store)]
    common += ["--signing-key", str(key), "--json"]
    good = commits[synthcore.BREAKING - 2]

    def nightly(*args: str):
        return vpr(*common, *args, cwd=setup["proj"], env=setup["env"], check=False)

    def last_known_good() -> schedule.Pointer:
        """The store's pointer, read as the nightly reads it: through the store's head."""
        public = keys.load_public_key(Path(f"{key}.pub"))
        pointer = trust.read_lkg(DirStore(store), "demo", public)
        assert pointer is not None
        return pointer

    done = nightly("--ref", good)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "pass" and report["manifest"] == "demo-nightly"
    assert last_known_good().core_commit == good
    # passed just now: the next scheduled run waits (8 h)
    skipped = nightly()
    assert skipped.returncode == 0 and json.loads(skipped.stdout)["status"] == "skipped"
    # main is broken: exit 1, what broke is named, the pointer stays
    done = nightly("--force")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["core"]["commit"] == commits[-1]
    assert report["failing"] == ["tests.test_core_api::test_api_level"]
    assert (
        "has no attribute 'api_level'" in report["errors"]["tests.test_core_api::test_api_level"][0]
    )
    since = report["since_last_known_good"]
    assert since["last_known_good"] == good and since["commits"] == 4
    assert f"--good {good} --bad {commits[-1]}" in report["bisect"]
    assert last_known_good().core_commit == good
    # failing: the schedule backs off to 24 h
    backing = json.loads(nightly().stdout)
    assert backing["status"] == "skipped" and "backing off: 1 failure" in backing["reason"]
    # the ledger has both verdicts, kind nightly; the nightly manifest is never published
    entries = json.loads(
        vpr(
            "manifest",
            "ledger",
            "--store",
            str(store),
            "--key",
            f"{key}.pub",
            "--json",
            "--kind",
            "nightly",
        ).stdout
    )
    assert [(e["verdict"], e["core"]["commit"]) for e in entries] == [
        ("pass", good),
        ("fail", commits[-1]),
    ]
    from vllm_plugin_release.core.errors import GateFailed
    from vllm_plugin_release.stages.publish import Gates, Proof, Target, publish_folder

    with pytest.raises(GateFailed, match="nightly manifests are never published"):
        publish_folder(
            setup["proj"] / "dist" / "demo-nightly",
            Target(store=str(store), index_root=tmp_path / "index"),
            Proof(scratch_root=tmp_path / "scratch"),
            Gates(public_key=Path(f"{key}.pub"), allow_uncertified=True),
        )
    assert not (store / "index.json").exists()


def test_version_matrix_marks_the_regressed_column(setup) -> None:
    core = str(setup["root"] / "core")
    done = vpr(
        "matrix",
        "run",
        "--spec",
        str(setup["spec"]),
        "--lowest",
        "0.1.0",
        "--prereleases",
        "--repo",
        core,
        "--json",
        cwd=setup["proj"],
        env=setup["env"],
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # a regression
    m = json.loads(done.stdout)
    cols = [(c["core"], c["role"], c["regressions"]) for c in m["columns"]]
    test = "tests.test_core_api::test_api_level"
    main = f"main@{setup['commits'][-1][:12]}"
    assert cols == [
        ("0.1.0", "lowest", []),
        ("0.1.1", "release", []),
        ("0.2.0rc1", "release", []),
        ("0.2.0rc2", "release", [test]),
        ("0.2.0", "pinned", []),
        (main, "main", []),
    ]
    md = (setup["proj"] / "dist" / "demo" / "matrix.md").read_text()
    assert "| 0.2.0rc2 | release | 3.11 | 1 of 2 | 1 | 1 | 0 | **1** |" in md
    assert "**0.2.0rc2** regressed against 0.2.0rc1:" in md
    assert f"- `{test}` AttributeError: module 'vllm' has no attribute 'api_level'" in md
    # final releases only: the regression shows on the release that ships it
    done = vpr(
        "matrix",
        "run",
        "--spec",
        str(setup["spec"]),
        "--lowest",
        "0.1.0",
        "--json",
        cwd=setup["proj"],
        env=setup["env"],
        check=False,
    )
    cols = [(c["core"], c["regressions"]) for c in json.loads(done.stdout)["columns"]]
    assert cols == [("0.1.0", []), ("0.1.1", []), ("0.2.0", [test])]
    # the matrix bytes depend on the inputs only
    first = (setup["proj"] / "dist" / "demo" / "matrix.json").read_bytes()
    vpr(
        "matrix",
        "run",
        "--spec",
        str(setup["spec"]),
        "--lowest",
        "0.1.0",
        cwd=setup["proj"],
        env=setup["env"],
        check=False,
    )
    assert (setup["proj"] / "dist" / "demo" / "matrix.json").read_bytes() == first


def test_bump_with_tests_bisects_into_the_migration_report(setup) -> None:
    proj, env, index = setup["proj"], setup["env"], setup["index"]
    sha = hashlib.sha256(index.files["vllm-0.1.1.tar.gz"]).hexdigest()
    old = proj / "buildspec" / "demo-old.toml"
    text = setup["spec"].read_text().replace('name = "demo"', 'name = "demo-old"', 1)
    text = text.replace('version = "0.2.0"', 'version = "0.1.1"', 1)
    old.write_text(text.replace(text.split('sha256 = "')[1].split('"')[0], sha))
    vpr("lock", "--spec", str(old), cwd=proj, env=env)
    vpr("build-plugin", "--spec", str(old), cwd=proj, env=env)
    done = vpr(
        "bump",
        "--spec",
        str(old),
        "--core",
        "0.2.0",
        "--dry-run",
        "--with-tests",
        "--bisect",
        "--json",
        *APPROVE,
        cwd=proj,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["plugin_tests"]["regressions"] == ["tests.test_core_api::test_api_level"]
    bisected = report["bisect"]
    assert bisected["status"] == "run" and bisected["mode"] == "index"
    assert (bisected["last_good"], bisected["first_bad"]["candidate"]) == ("0.2.0rc1", "0.2.0rc2")
    text = vpr(
        "bump",
        "--spec",
        str(old),
        "--core",
        "0.2.0",
        "--dry-run",
        "--with-tests",
        "--bisect",
        *APPROVE,
        cwd=proj,
        env=env,
    ).stdout
    assert "### Bisection: 0.1.1 (good) .. 0.2.0 (bad)" in text
    assert "First bad version: `0.2.0rc2`" in text
