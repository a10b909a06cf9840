"""What `vpr install` is asked (the request, the target) and what it verified (the
pairing): the records flows/install and flows/guarded share, in a module of their own so
neither imports the other for them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from vllm_plugin_release.core.manifestmodel import Manifest


@dataclass(frozen=True)
class Request:
    """What was asked for: an id (prefix), or a core and a plugin."""

    pairing: str | None = None
    core: str | None = None
    plugin: str | None = None


class VerifiedPairing(NamedTuple):
    """A stored pairing's manifest, verified: the document, its sha256, and the bytes of
    the manifest and its signed statement as the store served them (nothing is re-read)."""

    manifest: Manifest
    sha256: str
    data: bytes
    envelope: bytes


@dataclass(frozen=True)
class Target:
    """Where and how to install: the environment, the scratch folder (for the requirements
    file), uv offline or not, whether a lab verdict may be installed, the guard's policy to
    write beside the manifest (None: its default for the verdict) and the key the recovery
    line names."""

    env_dir: Path
    scratch: Path
    offline: bool = False
    allow_uncertified: bool = False
    guard_policy: str | None = None
    key_path: str | None = None
