"""The report of an installer scan, and what it records about vLLM core."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any

from vllm_plugin_release.conform.lib.requirements import Install, canonical
from vllm_plugin_release.conform.lib.shell import ShellCommand

HEX40 = re.compile(r"^[0-9a-f]{40}$")
_VERSION_TAG = re.compile(r"^v?(\d+(?:\.\d+)+(?:(?:a|b|rc)\d+)?(?:\.post\d+)?)$")
_VLLM_URL_VERSION = re.compile(
    r"github(?:usercontent)?\.com/vllm-project/vllm/(?:(?:blob|raw|tree|archive)/)?"
    r"(?:refs/tags/)?v?(\d+\.\d+(?:\.\d+)*(?:rc\d+)?)(?:/|\.tar\.gz|\.zip|$)"
)


@dataclass
class CorePin:
    requirement: str
    version: str | None
    exact: bool
    file: str
    line: int
    via: str  # install | requirements | constraint | override | git | sdist | url | uv.lock


@dataclass
class PinningReport:
    core_pin: dict[str, Any] | None = None
    core_pins: list[dict[str, Any]] = field(default_factory=list)
    core_refs: list[dict[str, Any]] = field(default_factory=list)
    target_device: dict[str, Any] | None = None
    from_source: dict[str, Any] = field(default_factory=lambda: {"value": False})
    unhashed_fetches: list[dict[str, Any]] = field(default_factory=list)
    editable_installs: list[dict[str, Any]] = field(default_factory=list)
    unpinned: list[dict[str, Any]] = field(default_factory=list)
    files_read: list[str] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # where the analysis of a script stopped (too tangled to follow): not vouched for
    incomplete: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class CoreFindings:
    """Records into the report what the inputs say about the core package."""

    def __init__(self, core_name: str, report: PinningReport) -> None:
        self.name = canonical(core_name)
        self.report = report
        self.installs: list[tuple[ShellCommand, dict[str, Any]]] = []

    def pin(self, pin: CorePin, inst: Install | None) -> None:
        self.report.core_pins.append(asdict(pin))
        if inst is not None and pin.via not in ("constraint", "override"):
            self.installs.append((inst.cmd, asdict(pin)))

    def git_pin(
        self, requirement: str, ref: str | None, file: str, line: int, inst: Install | None
    ) -> None:
        """The core installed from a git ref: a version tag or a commit is exact."""
        tag = _VERSION_TAG.match(ref or "")
        version = tag.group(1) if tag else None
        exact = bool(version or (ref and HEX40.match(ref)))
        self.pin(CorePin(requirement, version, exact, file, line, "git"), inst)

    def from_source(self, how: str, file: str, line: int) -> None:
        if not self.report.from_source.get("value"):
            self.report.from_source = {"value": True, "how": how, "file": file, "line": line}

    def vllm_url(self, url: str, file: str, line: int) -> None:
        """A fetch of vLLM's own files (e.g. its requirements) names a version."""
        m = _VLLM_URL_VERSION.search(url)
        if m:
            self.report.core_refs.append(
                {"version": m.group(1), "url": url, "file": file, "line": line}
            )

    def is_core_url(self, url: str) -> bool:
        tail = url.split("#")[0].split("@")[0].rstrip("/")
        return PurePosixPath(tail).name.removesuffix(".git") == self.name or bool(
            re.search(rf"/{re.escape(self.name)}(?:\.git)?(?:@|$|#)", url)
        )
