"""The TT image (`vpr build-image --spec buildspec/tt.toml`: Debian bookworm from its
packages, this machine's CPython 3.10 copied in, uv, libatomic1), made in a real
container engine: it is the pinned image when the CPython here is the pinned build, its
python runs, and the library ttnn loads is there. docker/tt-runtime.Dockerfile is built on
it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support import REPO
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.errors import OutsideFailure, PythonUnavailable
from vllm_plugin_release.edges import interpreters

SPEC = REPO / "buildspec" / "tt.toml"


# where the run started an engine a skip fails (tests/required.py), unless this machine has
# no CPython of the image's version to copy in (VPR_REQUIRE_PYTHONS makes that one fail)
@pytest.mark.docker(may_skip="no CPython")
def test_the_tt_image_is_made_again_to_its_pin_and_runs(tmp_path) -> None:
    from vllm_plugin_release.edges.container import connect

    try:
        client = connect()
    except OutsideFailure as exc:
        pytest.skip(f"no container engine: {exc.message}")
    spec = load_spec(SPEC)
    try:
        found = interpreters.find(spec.build.python, None, None)
    except PythonUnavailable as exc:
        pytest.skip(f"no CPython {spec.build.python} to copy in: {exc.message.splitlines()[0]}")
    done = subprocess.run(
        [sys.executable, "-m", "vllm_plugin_release", "build-image", "--spec", str(SPEC),
         "--json", "--cache-dir", str(tmp_path / "cache")],
        capture_output=True, text=True, check=False, cwd=REPO,
    )  # fmt: skip
    if found.sha256 != spec.build.image_python_sha256:  # another build of 3.10: refused
        assert done.returncode == 1 and "image_python_sha256 pins" in done.stderr
        return
    assert done.returncode == 0, done.stderr[-2000:]
    made = json.loads(done.stdout)
    assert made["image"] == spec.build.base_image  # the same digest, made again here
    assert f"fingerprint sha256:{found.sha256}" in made["python"]
    image_id = made["image"].split("@sha256:", 1)[1]  # a loaded image has no registry digest
    out = client.containers.run(
        image_id,
        ["/bin/sh", "-c", "python3.10 -c 'import ssl, sqlite3; print(\"py ok\")' && "
         "ls /usr/lib/x86_64-linux-gnu/libatomic.so.1"],
        remove=True, network_disabled=True,
    )  # fmt: skip
    assert b"py ok" in out and b"libatomic.so.1" in out
