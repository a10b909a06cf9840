"""`vpr image build`: the image the container runner runs in, made from Debian packages.

For machines that cannot reach a container registry. Two layers, both reproducible:
1. the root filesystem, `mmdebstrap --variant=apt` of the spec's Python from a Debian
   suite with SOURCE_DATE_EPOCH (the spec's core epoch): the same packages give the
   same tarball;
2. uv, from the wheel `docker/uv-requirements.txt` pins by hash.
The image is written as a `docker save` archive whose config has a fixed time
(`core/imagearchive.py`), so its ID (the digest `[build] base_image` pins) follows from
the two layers only, and loaded into the engine. The engine must report the same ID.

Debian's archive moves (point releases, security updates): the digest holds for as long
as the suite's packages do, or for ever with a snapshot mirror
(`--mirror http://snapshot.debian.org/archive/debian/<time>`).
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.cache import Cache, sha256_file
from vllm_plugin_release.core.errors import GateFailed, OutsideFailure
from vllm_plugin_release.core.imagearchive import file_layer, write_archive
from vllm_plugin_release.edges import container
from vllm_plugin_release.spec.model import Spec

DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# The CPython each Debian suite ships (an image for another Python comes from a registry).
SUITE_PYTHON = {"bookworm": ("3.11",), "trixie": ("3.13",)}
UV_REQUIREMENTS = "docker/uv-requirements.txt"


def image_name(python: str, suite: str) -> str:
    return f"localhost/vpr-build:{suite}-py{python.replace('.', '')}"


def check_python(python: str, suite: str) -> None:
    """OutsideFailure naming what is missing when `suite` has no CPython `python`."""
    shipped = SUITE_PYTHON.get(suite, ())
    if python not in shipped:
        raise OutsideFailure(
            f"Debian {suite} ships CPython {', '.join(shipped) or 'unknown'}, not {python} "
            "(the spec's [build] python): no Debian-based image for it can be made here",
            hint="pin a registry image that carries it in [build] base_image (e.g. "
            f"python:{python}-slim-bookworm@sha256:...) and `docker pull` it where a "
            "registry is reachable",
        )


def _uv_binary(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".data/scripts/uv")]
        if len(names) != 1:
            raise GateFailed(f"{wheel.name}: no uv program inside")
        return zf.read(names[0])


def build_image(
    spec: Spec, cache: Cache, *, suite: str = DEFAULT_SUITE, mirror: str = DEFAULT_MIRROR
) -> dict[str, Any]:
    """Make the Debian-based image for the spec's Python and load it; what was made."""
    python = spec.build.python
    check_python(python, suite)
    client = container.connect()
    name = image_name(python, suite)
    epoch = spec.core.source_date_epoch
    log = cache.root / "logs" / "image-build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    with cache.scratch("image-") as work:
        rootfs = work / "rootfs.tar"
        with progress.status(f"image: mmdebstrap {suite} with python{python} (about a minute)"):
            container.debian_rootfs(
                rootfs,
                suite=suite,
                packages=(f"python{python}", f"python{python}-venv", "ca-certificates"),
                epoch=epoch,
                mirror=mirror,
                log=log,
            )
        (work / "wheels").mkdir()
        wheel = container.download_wheel(spec.resolve(UV_REQUIREMENTS), work / "wheels")
        uv_layer = file_layer(
            work / "uv.tar", {"usr/local/bin/uv": (_uv_binary(wheel), 0o755)}, epoch=epoch
        )
        labels = {
            container.UV_LABEL: f"{wheel.name} sha256:{sha256_file(wheel)}",
            "vllm-plugin-release.rootfs": f"mmdebstrap {suite} {mirror} python{python}",
        }
        archive = work / "image.tar"
        image_id = write_archive(
            archive, [rootfs, uv_layer], repo_tag=name, epoch=epoch, labels=labels
        )
        with progress.status(f"image: loading {name} into the engine"):
            loaded = container.load_archive(client, archive)
        result = {
            "image": f"{name}@sha256:{image_id}",
            "rootfs_sha256": sha256_file(rootfs),
            "uv_layer_sha256": sha256_file(uv_layer),
            "uv_wheel": wheel.name,
        }
    if loaded != image_id:
        raise GateFailed(
            f"the engine loaded {name} as sha256:{loaded}, not the archive's sha256:{image_id}",
            hint="the engine rewrote the image config; use Docker or Podman's Docker API",
        )
    return result


def compare_pin(spec: Spec, made: str) -> str | None:
    """A message when the spec pins an image of the same name with another digest."""
    pinned = spec.build.base_image or ""
    name, digest = made.split("@sha256:")
    if pinned.split("@", 1)[0] != name:
        return None
    if pinned == made:
        return None
    return (
        f"{spec.path}: [build] base_image pins {pinned.split('@', 1)[1]}, "
        f"the image made here is sha256:{digest}"
    )
