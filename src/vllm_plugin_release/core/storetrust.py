"""What a consumer may take from a manifest store, as data (pure; the reads are
`edges.trust`'s): ids and store paths validated before any use.

A pairing id is a 64-hex sha256. A store path is relative, normalised and stays inside
the store: segments of letters, digits and `._+!-`, none empty, none `.` or `..`, none
hidden, no scheme, no leading `/`, no backslash, no `%`: it cannot name a local file, a
parent folder or another origin, and its URL is the store's URL plus the path itself.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core.errors import BadInput

if TYPE_CHECKING:
    from vllm_plugin_release.core.indexentry import IndexEntry
    from vllm_plugin_release.core.ledger import LedgerEntry
    from vllm_plugin_release.core.manifestmodel import Manifest


class Missing(BadInput):
    """A store file that is not there (a folder store's missing file, HTTP 404)."""


_PID = re.compile(r"[0-9a-f]{64}")
_SEGMENT = re.compile(r"[A-Za-z0-9_+!-][A-Za-z0-9._+!-]*")


def check_pid(value: Any, where: str) -> str:
    """`value` when it is a pairing id (64 lowercase hex characters); BadInput otherwise."""
    if isinstance(value, str) and _PID.fullmatch(value):
        return value
    shown = repr(value)[:80] if isinstance(value, str) else type(value).__name__
    raise BadInput(
        f"{where}: pairing id {shown} is not a sha256 (64 hexadecimal characters)",
        hint="the store index is damaged or hostile; nothing was read or written for it",
    )


def store_path(value: Any, where: str) -> str:
    """`value` when it is a safe store path (see the module's docstring); BadInput naming
    it otherwise."""
    parts = value.split("/") if isinstance(value, str) and 0 < len(value) <= 512 else [""]
    if all(_SEGMENT.fullmatch(part) for part in parts):
        return value
    shown = repr(value)[:120] if isinstance(value, str) else type(value).__name__
    raise BadInput(
        f"{where}: {shown} is not a path inside the store (a relative path of plain names, "
        "no '..', no scheme, no leading '/')",
        hint="a store names its files relative to itself; nothing was read for it",
    )


def entry_pid_problem(key: Any, entry: dict[str, Any]) -> str | None:
    """Why an index entry's key and pairing_id cannot be used (not a sha256, not the same),
    else None."""
    if not isinstance(key, str) or not _PID.fullmatch(key):
        return "the key is not a pairing id (a sha256: 64 hexadecimal characters)"
    if entry.get("pairing_id") != key:
        return "its pairing_id is not its key"
    return None


def request_problems(
    manifest: Manifest,
    entry: IndexEntry,
    *,
    pid: str,
    manifest_sha256: str,
    core: str | None = None,
    plugin: str | None = None,
) -> list[str]:
    """How a verified manifest differs from what was asked for: the pairing of the entry
    picked (its id, the manifest's sha256 the index names, its core and plugin), and the
    request's core (version or specifier) and plugin name. Empty: it is that pairing."""
    from packaging.utils import canonicalize_name

    problems = []
    if manifest.pairing_id != pid:
        problems.append(
            f"the manifest is pairing {manifest.pairing_id[:16]}, not {pid[:16]}: "
            "another pairing's files under this one's name"
        )
    if entry.manifest_sha256 != manifest_sha256:
        problems.append(
            f"the manifest's sha256 is {manifest_sha256[:16]}, the signed index names "
            f"{entry.manifest_sha256[:16]}"
        )
    have = (manifest.core.version, manifest.plugin.name, manifest.plugin.commit)
    said = (entry.core.version, entry.plugin.name, entry.plugin.commit)
    if have != said:
        problems.append(
            f"the manifest is {_pairing(*have)}, the index entry says {_pairing(*said)}"
        )
    if core and not core_matches(have[0], core):
        problems.append(f"the manifest's core is {have[0]}, asked for --core {core}")
    if plugin and canonicalize_name(have[1]) != canonicalize_name(plugin):
        problems.append(f"the manifest's plugin is {have[1]}, asked for --plugin {plugin}")
    return problems


def _pairing(core: str, plugin: str, commit: str | None) -> str:
    return f"core {core} + {plugin}@{(commit or 'no-commit')[:12]}"


def core_matches(version: str, wanted: str) -> bool:
    """`version` is `wanted` (a version, compared as PEP 440 versions) or within it (a
    specifier). BadInput for a `wanted` that is neither."""
    from packaging.version import InvalidVersion, Version

    if wanted[:1] in "<>=!~":
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            specifier = SpecifierSet(wanted)
        except InvalidSpecifier:
            raise BadInput(f"--core {wanted}: not a version or version specifier")
        try:
            return Version(version) in specifier
        except InvalidVersion:  # the store's version, not the user's argument
            return False
    try:
        return Version(version) == Version(wanted)
    except InvalidVersion:
        return version == wanted


def superseded(entries: list[LedgerEntry], pid: str, manifest_sha256: str) -> str | None:
    """Why the manifest with `manifest_sha256` is not the pairing's current verdict: the
    ledger's newest release entry for `pid` names another manifest. None when it names this
    one, or the ledger has no release entry for the pairing."""
    newest = next(
        (e for e in reversed(entries) if e.kind == "release" and e.pairing_id == pid),
        None,
    )
    if newest is None or newest.manifest_sha256 == manifest_sha256:
        return None
    return (
        f"the ledger's newest verdict for pairing {pid[:16]} is entry #{newest.seq} "
        f"({newest.verdict}, {newest.time}, manifest sha256 "
        f"{str(newest.manifest_sha256)[:16]}); the store serves manifest "
        f"{manifest_sha256[:16]}: a superseded verdict"
    )
