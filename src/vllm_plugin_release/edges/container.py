"""The docker backend: the same recipe commands, run in a container (Python docker SDK).

The runner builds the image from the spec's Dockerfile with the digest-pinned base
(BASE_IMAGE build arg; a FROM that is not pinned by digest is refused) and runs one
command in a fresh container with files copied in. The build recipe that drives it
(environment, then one container per build) is `stages/container_build.py`.

Exercised where an engine is reachable (CI on GitHub-hosted runners); elsewhere
constructing it fails with exit 3 and a message saying so.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.dockerlint import lint_file
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.edges.runner import Command

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

    def image(self) -> Any:
        """Build the image from the spec's Dockerfile (digest-pinned base); returns it."""
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

    def run_in(self, image: str, cmd: Command, *, network: bool, inputs: dict[str, bytes]) -> Any:
        """Run `cmd` in a new container from `image` (after copying `inputs` in); returns it."""
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
        with progress.working(f"{cmd.label} (in a container)"):
            status = container.wait()
        if status.get("StatusCode", 1) != 0:
            logs = container.logs(tail=25).decode(errors="replace")
            container.remove(force=True)
            raise GateFailed(f"{cmd.label} failed in the container:\n{logs}")
        return container


def tar_bytes(files: dict[str, bytes], mode: int = 0o644) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def tar_dir(path: Path, arcname: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        tf.add(path, arcname=arcname)
    return buf.getvalue()
