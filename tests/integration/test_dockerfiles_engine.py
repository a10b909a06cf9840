"""The pinned TT runtime base image in a real container engine."""

from __future__ import annotations

import pytest

from tests.support import REPO

TT = REPO / "docker" / "tt-runtime.Dockerfile"


@pytest.mark.docker(may_skip="the pinned base cannot be pulled")  # a registry, not the engine
def test_tt_runtime_base_is_python_3_10_in_an_engine() -> None:
    """Where an engine is reachable: the pinned base resolves and carries Python 3.10."""
    from vllm_plugin_release.core.errors import OutsideFailure
    from vllm_plugin_release.edges.container import connect

    try:
        client = connect()
    except OutsideFailure as exc:
        pytest.skip(f"no container engine: {exc.message}")
    base = next(
        line.split("=", 1)[1]
        for line in TT.read_text().splitlines()
        if line.startswith("ARG BASE_IMAGE=")
    )
    from docker.errors import APIError, ImageNotFound

    try:
        client.images.get(base)
    except ImageNotFound:
        try:
            client.images.pull(base)
        except APIError as exc:  # an engine, but no registry (e.g. this machine)
            pytest.skip(f"the pinned base cannot be pulled here: {exc}")
    out = client.containers.run(base, ["python", "--version"], remove=True, network_disabled=True)
    assert out.decode().startswith("Python 3.10.")
