"""The docker backend: refusals that need no engine here, the real build where one exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import REFERENCE_SPEC, REPO, vpr
from vllm_plugin_release.core.errors import OutsideFailure
from vllm_plugin_release.edges.container import connect


def engine_reason() -> str | None:
    try:
        connect()
    except OutsideFailure as exc:
        return exc.message
    return None


def docker_spec(tmp_path: Path, dockerfile: str | None = None) -> Path:
    text = REFERENCE_SPEC.read_text().replace('backend = "local"', 'backend = "docker"', 1)
    path = REPO / "docker" / "build.Dockerfile"
    if dockerfile is not None:
        path = tmp_path / "bad.Dockerfile"
        path.write_text(dockerfile)
    lock = REPO / "constraints" / "build-core-py311.txt"
    text = text.replace(
        'constraints = "constraints/build-core-py311.txt"',
        f'constraints = "{lock}"\ndockerfile = "{path}"',
    )
    spec = tmp_path / "docker.toml"
    spec.write_text(text)
    return spec


def test_unpinned_from_is_refused_with_its_line(tmp_path: Path, cache_root: Path) -> None:
    spec = docker_spec(tmp_path, "# build image\nARG X=1\nFROM python:3.11-slim\nRUN true\n")
    done = vpr(
        "build-core",
        "--spec",
        str(spec),
        "--cache-dir",
        str(cache_root),
        "--dist",
        str(tmp_path / "dist"),
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"{tmp_path / 'bad.Dockerfile'}:3: FROM python:3.11-slim is not pinned by digest" in (
        done.stderr
    )
    assert not (tmp_path / "dist").exists()


@pytest.mark.skipif(engine_reason() is None, reason="a container engine is reachable here")
def test_no_engine_is_an_outside_failure(tmp_path: Path, cache_root: Path) -> None:
    done = vpr(
        "build-core",
        "--spec",
        str(docker_spec(tmp_path)),
        "--cache-dir",
        str(cache_root),
        "--dist",
        str(tmp_path / "dist"),
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert "no reachable container engine" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "dist").exists()


@pytest.mark.docker
@pytest.mark.skipif(engine_reason() is not None, reason=f"no container engine: {engine_reason()}")
def test_docker_build_matches_the_local_recipe(tmp_path: Path, cache_root: Path) -> None:
    """Where an engine exists (CI on GitHub-hosted runners): the same recipe in a container."""
    done = vpr(
        "build-core",
        "--spec",
        str(docker_spec(tmp_path)),
        "--cache-dir",
        str(cache_root),
        "--dist",
        str(tmp_path / "dist"),
        cwd=REPO,
    )
    record = json.loads((tmp_path / "dist" / "reference" / "build-core.json").read_text())
    assert record["reproducible"] is True, done.stderr
    assert record["backend"]["kind"] == "docker"
    assert record["backend"]["image_id"]
    assert "@sha256:" in record["backend"]["base_image"]
