"""Shared fixtures, and the `integration` marker for everything under tests/integration/.

tests/unit/ is the fast loop (`nox -s tests -- -m "not integration"`): pure logic, loopback
servers in the test process and quick CLI runs, never the cache below. tests/integration/
builds and installs real artifacts, starts pypiserver, reads the real vLLM tree and wheel.

Real artifacts are built once per test session through the pipeline itself and
shared: the vLLM 0.26.0 empty wheel (`core_build`), its verified source tree
(`vllm_source_tree`) and a Python with that wheel installed (`vllm_python`).
Downloads and environments are content-addressed in the cache (`VPR_TEST_CACHE`,
default `.vpr/` in the repository), so a second session reuses them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.required import pytest_runtest_makereport  # noqa: F401 (a hook: required skips)
from tests.support import REFERENCE_SPEC, REPO, vpr

INTEGRATION = Path(__file__).resolve().parent / "integration"
FAULTS = Path(__file__).resolve().parent / "faults"


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION in item.path.parents:
            item.add_marker(pytest.mark.integration)
        if FAULTS in item.path.parents:
            # real subprocesses, servers and signals: not part of the fast loop either
            item.add_marker(pytest.mark.faults)
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def cache_root() -> Path:
    return Path(os.environ.get("VPR_TEST_CACHE", REPO / ".vpr"))


@pytest.fixture(scope="session")
def session_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dist")


@pytest.fixture(scope="session")
def core_build(cache_root: Path, session_dist: Path) -> dict:
    """`vpr build-core` of buildspec/reference.toml: the real vLLM 0.26.0 empty wheel."""
    vpr(
        "build-core",
        "--spec",
        str(REFERENCE_SPEC),
        "--dist",
        str(session_dist),
        "--cache-dir",
        str(cache_root),
    )
    out = session_dist / "reference"
    record = json.loads((out / "build-core.json").read_text())
    record["_wheel_path"] = str(out / record["wheel"]["filename"])
    return record


@pytest.fixture(scope="session")
def vllm_source_tree(cache_root: Path) -> Path:
    """The verified, extracted vLLM 0.26.0 sdist tree."""
    given = os.environ.get("VPR_TEST_VLLM_TREE")
    if given:
        return Path(given)
    done = vpr("fetch", "--spec", str(REFERENCE_SPEC), "--cache-dir", str(cache_root))
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def reference_env(core_build: dict, cache_root: Path, session_dist: Path) -> dict:
    """`vpr build-plugin` + `vpr env` of buildspec/reference.toml (cpu runner): the record."""
    common = (
        "--spec",
        str(REFERENCE_SPEC),
        "--dist",
        str(session_dist),
        "--cache-dir",
        str(cache_root),
    )
    vpr("build-plugin", *common)
    vpr("env", *common)
    return json.loads((session_dist / "reference" / "env.json").read_text())


@pytest.fixture(scope="session")
def vllm_python(request: pytest.FixtureRequest) -> Path:
    """A Python with the real vLLM 0.26.0+empty wheel and the reference plugin installed
    (no runtime: the stand-in lives in an overlay). VPR_TEST_VLLM_PYTHON overrides."""
    given = os.environ.get("VPR_TEST_VLLM_PYTHON")
    if given:
        return Path(given)
    return Path(request.getfixturevalue("reference_env")["python"])


@pytest.fixture(scope="session")
def vllm_wheel(core_build: dict) -> Path:
    return Path(core_build["_wheel_path"])


@pytest.fixture
def deep_tmp(tmp_path: Path):
    """`tmp_path` for a tree nested deeper than Python's recursion limit, emptied without
    recursion afterwards (pytest's own clean-up of old temp folders uses shutil.rmtree,
    which such a tree crashes)."""
    from vllm_plugin_release.core.cache import remove_tree

    yield tmp_path
    for child in list(tmp_path.iterdir()):
        remove_tree(child, ignore_errors=True)
