"""`vpr build-image`: the container runner's image, made reproducibly from Debian packages (and
this machine's CPython when the suite lacks it), for machines that cannot reach a registry."""

from __future__ import annotations

import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import progress
from vllm_plugin_release.core.cache import Cache, sha256_file
from vllm_plugin_release.core.errors import GateFailed, OutsideFailure
from vllm_plugin_release.core.image import file_layer, tree_layer, write_archive
from vllm_plugin_release.edges import container, interpreters
from vllm_plugin_release.edges.uv import uv_bin

DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# The CPython each Debian suite ships (another is this machine's, copied in).
SUITE_PYTHON = {"bookworm": ("3.11",), "trixie": ("3.13",)}
UV_REQUIREMENTS = "docker/uv-requirements.txt"


def check_python(python: str, suite: str) -> None:
    """OutsideFailure naming what is missing when `suite` is not a Debian suite we know."""
    if suite not in SUITE_PYTHON:
        raise OutsideFailure(
            f"unknown Debian suite {suite!r}; known: {', '.join(SUITE_PYTHON)}",
            hint="use --suite bookworm (the default)",
        )


@dataclass(frozen=True)
class PythonLayer:
    """How the image gets its CPython: Debian's, or this machine's copied in at the same path
    (its libpython is found through an absolute RUNPATH) with the packages it links against."""

    packages: tuple[str, ...]
    layer: Path | None
    label: str

    @property
    def rootfs(self) -> str:
        """What the rootfs label says it holds: Debian's python (as before), or the packages."""
        if self.layer is None and len(self.packages) == 3:
            return self.packages[0]
        return " ".join(self.packages)


def python_layer(spec: Spec, suite: str, work: Path, epoch: int) -> PythonLayer:
    """Debian's python3.X where the suite ships the spec's Python; else this machine's CPython,
    copied in and recorded by its fingerprint and the layer's sha256."""
    python = spec.build.python
    runtime = spec.runtime.system_packages if spec.runtime else ()  # what its wheels load
    if python in SUITE_PYTHON[suite]:
        packages = (f"python{python}", f"python{python}-venv", "ca-certificates", *runtime)
        return PythonLayer(packages, None, f"Debian {suite} python{python}")
    found = interpreters.find(python, spec.build.interpreter, uv_bin())
    pinned = spec.build.image_python_sha256
    if pinned and found.sha256 != pinned:
        raise GateFailed(
            f"{found.path} (CPython {found.version}, found by {found.found_by}) has fingerprint "
            f"sha256:{found.sha256}, not the sha256:{pinned} [build] image_python_sha256 pins",
            hint="name the pinned build with --interpreter PATH, or pin this one if you trust "
            "it (the image's digest changes with it)",
        )
    members = interpreters.install_members(found)
    prefix = Path(found.prefix)
    elf = [
        prefix / m
        for m in members
        if (m.startswith("bin/") or m.endswith(".so") or ".so." in m)
        and (prefix / m).is_file()
        and not (prefix / m).is_symlink()
    ]
    packages = ("ca-certificates", *container.debian_packages_for(elf), *runtime)
    exe = Path(found.path)
    link = {f"usr/local/bin/python{python}": exe if exe.is_absolute() else prefix / exe}
    layer = tree_layer(
        work / "python.tar", prefix, members, at=str(prefix), epoch=epoch, links=link
    )
    label = (
        f"CPython {found.version} from {found.prefix} (found by {found.found_by}), "
        f"fingerprint sha256:{found.sha256}, layer sha256:{sha256_file(layer)}"
    )
    return PythonLayer(packages, layer, label)


@dataclass(frozen=True, slots=True)
class BuiltImage:
    """The image `build_image` made and loaded: its pinned reference and what it holds."""

    image: str  # NAME@sha256:ID, what [build] base_image pins
    rootfs_sha256: str
    uv_layer_sha256: str
    uv_wheel: str
    python: str  # where its CPython comes from (PythonLayer.label)

    def to_json(self) -> dict[str, str]:
        """As `vpr build-image --json` prints it: the fields, in order."""
        return asdict(self)


def _uv_binary(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".data/scripts/uv")]
        if len(names) != 1:
            raise GateFailed(f"{wheel.name}: no uv program inside")
        return zf.read(names[0])


def build_image(
    spec: Spec, cache: Cache, *, suite: str = DEFAULT_SUITE, mirror: str = DEFAULT_MIRROR
) -> BuiltImage:
    """Make the Debian-based image for the spec's Python and load it; what was made."""
    check_python(spec.build.python, suite)
    client = container.connect()  # first: no engine is exit 3 before a minute of mmdebstrap
    try:
        return _build_image(spec, cache, client, suite, mirror)
    finally:
        client.close()


def _build_image(spec: Spec, cache: Cache, client: Any, suite: str, mirror: str) -> BuiltImage:
    python = spec.build.python
    name = f"localhost/vpr-build:{suite}-py{python.replace('.', '')}"
    epoch = spec.core.source_date_epoch
    log = cache.root / "logs" / "image-build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    with cache.scratch("image-") as work:
        rootfs = work / "rootfs.tar"
        made = python_layer(spec, suite, work, epoch)
        with progress.status(f"image: mmdebstrap {suite} for python{python} (about a minute)"):
            container.debian_rootfs(
                rootfs, suite=suite, packages=made.packages, epoch=epoch, mirror=mirror, log=log
            )
        (work / "wheels").mkdir()
        wheel = container.download_wheel(spec.resolve(UV_REQUIREMENTS), work / "wheels")
        uv_layer = file_layer(
            work / "uv.tar", {"usr/local/bin/uv": (_uv_binary(wheel), 0o755)}, epoch=epoch
        )
        labels = {
            container.UV_LABEL: f"{wheel.name} sha256:{sha256_file(wheel)}",
            "vllm-plugin-release.rootfs": f"mmdebstrap {suite} {mirror} {made.rootfs}",
            # only for a copied-in Python: an image of Debian's keeps the digest it had
            **({"vllm-plugin-release.python": made.label} if made.layer else {}),
        }
        layers = [rootfs, *([made.layer] if made.layer else []), uv_layer]
        archive = work / "image.tar"
        image_id = write_archive(archive, layers, repo_tag=name, epoch=epoch, labels=labels)
        with progress.status(f"image: loading {name} into the engine"):
            loaded = container.load_archive(client, archive)
        image, uv_sha = f"{name}@sha256:{image_id}", sha256_file(uv_layer)
        result = BuiltImage(image, sha256_file(rootfs), uv_sha, wheel.name, made.label)
    if loaded != image_id:
        raise GateFailed(
            f"the engine loaded {name} as sha256:{loaded}, not the archive's sha256:{image_id}",
            hint="the engine rewrote the image config; use Docker or Podman's Docker API",
        )
    if made.layer is not None:  # a copied-in Python: it runs its standard library there
        container.check_python_runs(client, image_id, python)
    return result


def compare_pin(spec: Spec, made: str) -> str | None:
    """A message when the spec pins an image of the same name with another digest."""
    pinned = spec.build.base_image or ""
    name, digest = made.split("@sha256:")
    if pinned.split("@", 1)[0] != name or pinned == made:
        return None
    return (
        f"{spec.path}: [build] base_image pins {pinned.split('@', 1)[1]}, "
        f"the image made here is sha256:{digest}"
    )
