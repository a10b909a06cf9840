"""The docker backend: the same recipe commands, run in a container (Python docker SDK).

1. Build the image from the spec's Dockerfile with the digest-pinned base
   (BASE_IMAGE build arg); a FROM that is not pinned by digest is refused.
2. Run the environment commands (with network) in a container from it and commit
   the result: the build environment image.
3. For each build: create a container from that image with the network disabled,
   copy the source in, run the wheel command, copy the wheel out.

Exercised where an engine is reachable (CI on GitHub-hosted runners); elsewhere
constructing it fails with exit 3 and a message saying so.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

from vllm_plugin_release.core.dockerlint import lint_file
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.edges.runner import Command
from vllm_plugin_release.stages import recipes
from vllm_plugin_release.stages.lock import pip_find_links

WORKSPACE = "/workspace"
VENV = "/opt/vpr-build-env"


def connect() -> Any:
    """A docker client with a reachable engine, or exit 3 saying why."""
    try:
        from docker.errors import DockerException

        import docker
    except ImportError:
        raise OutsideFailure("the docker backend needs the `docker` package (pip install docker)")
    try:
        client = docker.from_env(timeout=30)
        client.ping()
        return client
    except DockerException as exc:
        raise OutsideFailure(
            f"no reachable container engine for the docker backend ({exc})",
            hint="start Docker/Podman (DOCKER_HOST) or set [build] backend = 'local'",
        )


class DockerRunner:
    kind = "docker"

    def __init__(self, base_image: str | None, dockerfile: Path) -> None:
        if not base_image:
            raise BadInput("[build] base_image is required for backend = 'docker'")
        if not dockerfile.exists():
            raise BadInput(f"{dockerfile}: Dockerfile not found", hint="see [build] dockerfile")
        problems = lint_file(dockerfile, {"BASE_IMAGE": base_image})
        if problems:
            first = problems[0]
            raise BadInput(
                f"{dockerfile}:{first.line}: {first.message}",
                hint="pin every base image by digest: FROM name@sha256:<digest>",
            )
        self.base_image = base_image
        self.dockerfile = dockerfile
        self.client = connect()
        self.image_id: str | None = None

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind, "base_image": self.base_image, "image_id": self.image_id}

    def _image(self) -> Any:
        from docker.errors import BuildError

        root = self.dockerfile.parent.parent
        try:
            image, _ = self.client.images.build(
                path=str(root),
                dockerfile=str(self.dockerfile.relative_to(root)),
                buildargs={"BASE_IMAGE": self.base_image},
                rm=True,
                pull=False,
            )
        except BuildError as exc:
            raise GateFailed(f"{self.dockerfile}: image build failed: {exc.msg}")
        self.image_id = image.id
        return image

    def _run(self, image: str, cmd: Command, *, network: bool, inputs: dict[str, bytes]) -> Any:
        container = self.client.containers.create(
            image,
            command=list(cmd.argv),
            environment=dict(cmd.env),
            working_dir=cmd.cwd or WORKSPACE,
            network_disabled=not network,
        )
        for dest, archive in inputs.items():
            container.put_archive(dest, archive)
        container.start()
        status = container.wait()
        if status.get("StatusCode", 1) != 0:
            logs = container.logs(tail=25).decode(errors="replace")
            container.remove(force=True)
            raise GateFailed(f"{cmd.label} failed in the container:\n{logs}")
        return container

    def build(
        self, spec: Any, tree: Path, lock_path: Path, scratch: Path, *, builds: int
    ) -> list[dict[str, Any]]:
        image = self._image()
        env = {
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TZ": "UTC",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
        }
        current = image.id
        lock_tar = _tar_bytes({"build-lock.txt": lock_path.read_bytes()})
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
            container = self._run(current, cmd, network=True, inputs={WORKSPACE: lock_tar})
            current = container.commit().id
            container.remove(force=True)
        shim_tar = _tar_bytes(
            {f"shim/{tool}": recipes.RUST_SHIM.encode() for tool in recipes.RUST_TOOLS}, mode=0o755
        )
        results: list[dict[str, Any]] = []
        source_tar = _tar_dir(tree, arcname=tree.name)
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
            prep = self._run(current, mkdir, network=False, inputs={})
            base = prep.commit().id
            prep.remove(force=True)
            container = self._run(
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


def _tar_bytes(files: dict[str, bytes], mode: int = 0o644) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _tar_dir(path: Path, arcname: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        tf.add(path, arcname=arcname)
    return buf.getvalue()
