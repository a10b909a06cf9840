"""The spec's pins: what a pairing was asked to be built from (its name, the core and its
source, the plugin and runtime tables, the build's Python, backend, base image, torch and
constraints, the API approval), as the signed statement holds them: SLSA provenance's
`externalParameters` (`attest.sign_pairing`).

The manifest stage builds them from the typed buildspec (`stages/manifest.pins_from_spec`)
and reads the few it needs (the name, the source date, the runtime pins, the approval);
`to_json` is the object signed, word for word. The spec's `[plugin]` and `[runtime]` tables
are open (the statement signs every key as written), so each is kept as `raw`, beside the
typed values read from it. Never read back: nothing parses a statement's pins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core.manifestdoc import RuntimePins

if TYPE_CHECKING:
    from vllm_plugin_release.core.manifestmodel import Approval


@dataclass(frozen=True, slots=True)
class SdistPin:
    """The core's source as an sdist: the index, its file name and sha256."""

    index: str
    filename: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {
            "kind": "sdist",
            "index": self.index,
            "filename": self.filename,
            "sha256": self.sha256,
        }


@dataclass(frozen=True, slots=True)
class GitPin:
    """The core's source as a git commit: the repository, the tag and the commit."""

    url: str
    tag: str
    commit: str

    def to_json(self) -> dict[str, str]:
        return {"kind": "git", "url": self.url, "tag": self.tag, "commit": self.commit}


@dataclass(frozen=True, slots=True)
class CorePins:
    """`[core]`'s pins: name, version, target device, source date and source."""

    name: str
    version: str
    target_device: str
    source_date_epoch: int
    source: SdistPin | GitPin

    def to_json(self) -> dict[str, str | int | dict[str, str]]:
        return {
            "name": self.name,
            "version": self.version,
            "target_device": self.target_device,
            "source_date_epoch": self.source_date_epoch,
            "source": self.source.to_json(),
        }


@dataclass(frozen=True, slots=True)
class BuildPins:
    """`[build]`'s pins: the Python, the backend, the base image, torch, the constraints."""

    python: str
    backend: str
    base_image: str | None
    torch: str
    constraints: str

    def to_json(self) -> dict[str, str | None]:
        return {
            "python": self.python,
            "backend": self.backend,
            "base_image": self.base_image,
            "torch": self.torch,
            "constraints": self.constraints,
        }


@dataclass(frozen=True)
class PluginTable:
    """The spec's `[plugin]`: its name; `raw`, the table as written (signed as it is)."""

    name: str
    raw: dict[str, Any]


@dataclass(frozen=True)
class RuntimeTable:
    """The spec's `[runtime]`: the pins a pairing id holds (its name, package, version and
    commit; None when the table is empty); `raw`, the table as written (signed as it is)."""

    pins: RuntimePins | None
    raw: dict[str, Any]


@dataclass(frozen=True)
class SpecPins:
    """The spec's pins, what the statement signs as `externalParameters` (`to_json`).
    `plugin`/`runtime` None: the spec has no such table (signed as `{}` and `null`);
    `api_approval` None: none to sign (the key is then left out, as it always was)."""

    name: str
    core: CorePins
    plugin: PluginTable | None
    runtime: RuntimeTable | None
    build: BuildPins
    api_approval: Approval | None = None

    def to_json(self) -> dict[str, Any]:
        """The statement's `externalParameters`, word for word as signed before."""
        out: dict[str, Any] = {
            "name": self.name,
            "core": self.core.to_json(),
            "plugin": {} if self.plugin is None else dict(self.plugin.raw),
            "runtime": None if self.runtime is None else dict(self.runtime.raw),
            "build": self.build.to_json(),
        }
        if self.api_approval is not None:
            out["api_approval"] = self.api_approval.as_json()
        return out
