"""The core build recipe on the container runner (the docker backend).

1. Build the image from the spec's Dockerfile with the digest-pinned base.
2. Run the environment commands (with network) in a container from it and commit
   the result: the build environment image.
3. For each build: create a container from that image with the network disabled,
   copy the source in, run the wheel command, copy the wheel out.

Exercised where an engine is reachable; elsewhere constructing the runner fails
with exit 3 and a message saying so.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.edges.container import VENV, WORKSPACE, DockerRunner, tar_bytes, tar_dir
from vllm_plugin_release.edges.runner import Command
from vllm_plugin_release.edges.uv import pip_find_links
from vllm_plugin_release.spec.model import Spec
from vllm_plugin_release.stages import recipes


def container_build(
    runner: DockerRunner, spec: Spec, tree: Path, lock_path: Path, scratch: Path, *, builds: int
) -> list[dict[str, Any]]:
    """The core build recipe in containers: the locked environment committed as an image,
    then `builds` builds, each in its own container with no network; returns the wheels."""
    image = runner.image()
    env = {
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
    }
    current = image.id
    lock_tar = tar_bytes({"build-lock.txt": lock_path.read_bytes()})
    for cmd in recipes.venv_commands(
        uv="uv",
        python=spec.build.python,
        venv=VENV,
        lock=f"{WORKSPACE}/build-lock.txt",
        # Local folders of this machine do not exist in the container: URLs only.
        find_links=[
            link
            for link in [*spec.build.find_links, *pip_find_links()]
            if link.startswith(("http://", "https://"))
        ],
        env=env,
    ):
        container = runner.run_in(current, cmd, network=True, inputs={WORKSPACE: lock_tar})
        current = container.commit().id
        container.remove(force=True)
    shim_tar = tar_bytes(
        {f"shim/{tool}": recipes.RUST_SHIM.encode() for tool in recipes.RUST_TOOLS}, mode=0o755
    )
    results: list[dict[str, Any]] = []
    source_tar = tar_dir(tree, arcname=tree.name)
    for index in range(builds):
        work = f"{WORKSPACE}/build-{'ab'[index]}"
        build_env = recipes.build_env(
            base={**env, "HOME": f"{work}/home"},
            venv=VENV,
            shim=f"{WORKSPACE}/shim",
            target_device=spec.core.target_device,
            source_date_epoch=spec.core.source_date_epoch,
        )
        cmd = recipes.wheel_command(
            venv=VENV, src=f"{work}/{tree.name}", outdir=f"{work}/out", env=build_env
        )
        mkdir = Command("prepare workspace", ("mkdir", "-p", work, f"{work}/home"), env=env)
        prep = runner.run_in(current, mkdir, network=False, inputs={})
        base = prep.commit().id
        prep.remove(force=True)
        container = runner.run_in(
            base, cmd, network=False, inputs={WORKSPACE: shim_tar, work: source_tar}
        )
        stream, _ = container.get_archive(f"{work}/out")
        out = scratch / f"out-{index}"
        out.mkdir()
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tf:
            tf.extractall(out, filter="data")
        container.remove(force=True)
        wheels = sorted(out.rglob("*.whl"))
        if len(wheels) != 1:
            raise GateFailed(f"container build {index + 1} produced {len(wheels)} wheels")
        results.append({"wheel": wheels[0], "env": build_env, "python": spec.build.python})
    return results
