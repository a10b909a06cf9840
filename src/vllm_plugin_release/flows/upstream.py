"""Core releases on the spec's index newer than the pinned one (`vpr upstream`), from the
index's simple API, each with its upload time, sdist and sha256."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from vllm_plugin_release.buildspec.model import SdistSource, Spec
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges.fetch import index_files
from vllm_plugin_release.edges.index import IndexFile

DEFAULT_INDEX = "https://pypi.org/simple"


@dataclass(frozen=True)
class Release:
    """One core release as the index lists it."""

    version: str
    upload_time: str | None
    filename: str | None  # the sdist, when there is one
    sha256: str | None
    prerelease: bool
    files: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def file_version(project: str, filename: str) -> Version | None:
    """The version of one of `project`'s files, or None for anything else."""
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidSdistFilename, InvalidWheelFilename, InvalidVersion):
        return None
    return version if name == canonicalize_name(project) else None


def releases_from_files(project: str, files: list[IndexFile]) -> list[Release]:
    """Releases (oldest first) from an index listing; yanked files are left out."""
    by_version: dict[Version, list[IndexFile]] = {}
    for f in files:
        if f.yanked:
            continue
        version = file_version(project, f.filename)
        if version is not None:
            by_version.setdefault(version, []).append(f)
    out: list[Release] = []
    for version in sorted(by_version):
        group = by_version[version]
        sdist = next((f for f in group if not f.filename.endswith(".whl")), None)
        times = sorted(f.upload_time for f in group if f.upload_time)
        out.append(
            Release(
                version=str(version),
                upload_time=(sdist.upload_time if sdist and sdist.upload_time else None)
                or (times[0] if times else None),
                filename=sdist.filename if sdist else None,
                sha256=sdist.sha256 if sdist else None,
                prerelease=version.is_prerelease,
                files=len(group),
            )
        )
    return out


def published(project: str, index: str, prereleases: bool) -> list[str]:
    """The versions of `project` on `index` with a hashed sdist, oldest first."""
    found = releases_from_files(project, index_files(index, project))
    keep = [r for r in found if r.filename and r.sha256 and (prereleases or not r.prerelease)]
    return [r.version for r in keep]


def spec_index(spec: Spec, index: str | None = None) -> str:
    if index:
        return index.rstrip("/")
    src = spec.core.source
    return src.index if isinstance(src, SdistSource) else DEFAULT_INDEX


def newer_releases(
    spec: Spec,
    *,
    index: str | None = None,
    include_prereleases: bool = False,
    only: str | None = None,
) -> list[Release]:
    """Core releases newer than the pinned one (oldest first)."""
    pinned = Version(spec.core.version)
    url = spec_index(spec, index)
    found = releases_from_files(spec.core.name, index_files(url, spec.core.name))
    if only:
        try:
            wanted = Version(only)
        except InvalidVersion:
            raise BadInput(f"--version {only!r} is not a PEP 440 version (e.g. 0.26.0)")
        if wanted <= pinned:
            raise BadInput(
                f"--version {only}: not newer than the pinned {spec.core.name} {pinned} "
                f"({spec.path})"
            )
        match = [r for r in found if Version(r.version) == wanted]
        if not match:
            raise BadInput(
                f"{url}/{canonicalize_name(spec.core.name)}/: no release {only}",
                hint="`vpr upstream --spec FILE` lists the releases newer than the pin",
            )
        return match
    return [
        r
        for r in found
        if Version(r.version) > pinned and (include_prereleases or not r.prerelease)
    ]


def render_releases(spec: Spec, found: list[Release], index: str, prereleases: bool) -> str:
    kind = "releases" if prereleases else "final releases"
    head = f"{spec.core.name} {kind} newer than {spec.core.version} on {index}"
    if not found:
        return f"{head}: none ({spec.path} pins the newest)"
    lines = [f"{head}:"]
    width = max(len(r.version) for r in found)
    for r in found:
        day = (r.upload_time or "?")[:10]
        sdist = f"{r.filename}  sha256:{r.sha256}" if r.filename else "no sdist (cannot be pinned)"
        tag = "  (pre-release)" if r.prerelease else ""
        lines.append(f"  {r.version:<{width}}  {day:<10}  {sdist}{tag}")
    return "\n".join(lines)
