"""The pairing ledger: every verdict the pipeline reached, signed, chained, append-only (pure).

`STORE/ledger/ledger.jsonl` holds one DSSE envelope per line (canonical JSON), signed with
the manifest key (ed25519). Its payload is one entry:

  seq, prev            the entry's number and the sha256 of the previous line (a chain:
                       a removed, reordered or edited line breaks every later link)
  kind                 release | nightly
  core                 {name, version, commit}   (commit: a git core source's)
  plugin               {name, version, commit}
  runtime, python, verdict, runner, time (UTC), manifest_sha256, pairing_id
  lag                  {days, minor_releases} behind the newest core, when known

Reading refuses the whole ledger at the first line whose signature or link fails
(GateFailed, exit 1, naming the line). Files and locks are `edges.ledgerstore`'s.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core import bounded, signed
from vllm_plugin_release.core.errors import BadInput, GateFailed

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from vllm_plugin_release.core.manifestmodel import Manifest

LEDGER_FILE = "ledger/ledger.jsonl"
PAYLOAD_TYPE = "application/vnd.vllm-plugin-release.ledger-entry+json"
GENESIS = "0" * 64
KINDS = ("release", "nightly")


def line_digest(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def entry_from_manifest(
    manifest: Manifest,
    *,
    manifest_sha256: str,
    runner: str,
    time: str,
    kind: str = "release",
    lag: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ledger entry (without seq/prev) for the verdict a manifest carries."""
    if kind not in KINDS:
        raise BadInput(f"ledger kind {kind!r}: expected one of {', '.join(KINDS)}")
    core, plugin, runtime = manifest.core, manifest.plugin, manifest.runtime
    entry: dict[str, Any] = {
        "kind": kind,
        "pairing_id": manifest.pairing_id,
        "core": {"name": core.name, "version": core.version, "commit": core.commit},
        "plugin": {"name": plugin.name, "version": plugin.version, "commit": plugin.commit},
        "runtime": {"name": runtime.name, "status": runtime.status},
        "python": ".".join(str(core.python).split(".")[:2]),
        "verdict": manifest.verdict,
        "runner": runner,
        "time": time,
        "manifest_sha256": manifest_sha256,
    }
    if lag is not None:
        entry["lag"] = lag
    return entry


def chained(entry: dict[str, Any], previous_line: bytes | None, count: int) -> dict[str, Any]:
    """`entry` with its place in the chain: seq (1-based) and the previous line's digest."""
    prev = line_digest(previous_line) if previous_line else GENESIS
    return {"seq": count + 1, "prev": prev, **entry}


def sign_line(entry: dict[str, Any], key: Ed25519PrivateKey) -> bytes:
    """One ledger line: `entry` in a DSSE envelope signed with `key`, canonical, newline."""
    return signed.sign(entry, PAYLOAD_TYPE, key)


def _verified_entry(line: bytes, public_key: Ed25519PublicKey, where: str) -> dict[str, Any]:
    return signed.verify(line, PAYLOAD_TYPE, public_key, where, what="ledger entry", hint=_HINT)


_NONE = bounded.NONE
# What select, matrix and the renderers read from an entry (seq and prev are checked apart).
_ENTRY_SHAPE = bounded.shape(
    (
        ("kind", (str,)),
        ("pairing_id", (str, _NONE)),
        ("core.name", (str, _NONE)),
        ("core.version", (str, _NONE)),
        ("core.commit", (str, _NONE)),
        ("plugin.name", (str, _NONE)),
        ("plugin.version", (str, _NONE)),
        ("plugin.commit", (str, _NONE)),
        ("python", (str, _NONE)),
        ("verdict", (str, _NONE)),
        ("runner", (str, _NONE)),
        ("time", (str, _NONE)),
        ("manifest_sha256", (str, _NONE)),
        ("lag", (dict, _NONE)),
    )
)
_HINT = "the ledger is append-only: restore the store's ledger from its last good copy"


def entry_problem(entry: Any) -> str | None:
    """Why a signed payload is not a ledger entry (what select, matrix and the renderers
    read of it), else None; seq and prev are the chain's to check."""
    return bounded.shape_problem(entry, _ENTRY_SHAPE)


def parse_ledger(
    data: bytes, public_key: Ed25519PublicKey, where: str, *, vouched: bool = False
) -> list[dict[str, Any]]:
    """Every entry, oldest first, each signature, shape and chain link checked.
    `vouched`: `data` is exactly the ledger a signed store head names by sha256 (its
    writer verified every line before it signed), so each line's own signature is not
    checked again; the rest is."""
    entries: list[dict[str, Any]] = []
    previous: bytes | None = None
    for number, line in enumerate(data.splitlines(keepends=True), start=1):
        here = f"{where}:{number}"
        if not line.endswith(b"\n"):
            raise GateFailed(f"{here}: the last line is cut short (a torn write)", hint=_HINT)
        if vouched:
            entry = signed.unverified(line, PAYLOAD_TYPE, here, what="ledger entry", hint=_HINT)
        else:
            entry = _verified_entry(line, public_key, here)
        problem = entry_problem(entry)
        if problem:
            raise BadInput(
                f"{here}: a signed entry that is not a ledger entry ({problem})",
                hint="the ledger was written by something other than vpr; restore it",
            )
        expected = line_digest(previous) if previous else GENESIS
        if entry.get("seq") != number or entry.get("prev") != expected:
            raise GateFailed(
                f"{here}: the chain is broken (seq {entry.get('seq')}, expected {number}): "
                "an entry was removed, reordered or inserted",
                hint=_HINT,
            )
        entries.append(entry)
        previous = line
    return entries


def select(
    entries: Iterable[dict[str, Any]],
    *,
    core: str | None = None,
    plugin: str | None = None,
    verdict: str | None = None,
    kind: str | None = None,
) -> list[dict[str, Any]]:
    """The entries matching every filter given (core: version or commit prefix)."""
    out = []
    for e in entries:
        c = e.get("core") or {}
        if core and core != c.get("version") and not str(c.get("commit") or "").startswith(core):
            continue
        p = e.get("plugin") or {}
        if plugin and plugin != p.get("name") and not str(p.get("commit") or "").startswith(plugin):
            continue
        if verdict and e.get("verdict") != verdict:
            continue
        if kind and e.get("kind") != kind:
            continue
        out.append(e)
    return out


def _core_label(e: dict[str, Any]) -> str:
    c = e.get("core") or {}
    if e.get("kind") == "nightly" and c.get("commit"):
        return f"{c['version']}@{str(c['commit'])[:12]}"
    return str(c.get("version"))


def _plugin_label(e: dict[str, Any]) -> str:
    p = e.get("plugin") or {}
    return f"{p.get('name')}@{str(p.get('commit') or 'no-commit')[:12]}"


def matrix(entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The compatibility matrix from the ledger: the latest verdict per (core, plugin)."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for e in entries:
        cells[(_core_label(e), _plugin_label(e))] = e  # later entries win
    cores = sorted({c for c, _ in cells})
    plugins = sorted({p for _, p in cells})
    return {
        "cores": cores,
        "plugins": plugins,
        "cells": {
            f"{c} | {p}": {
                "verdict": e.get("verdict"),
                "seq": e.get("seq"),
                "kind": e.get("kind"),
                "lag": e.get("lag"),
            }
            for (c, p), e in sorted(cells.items())
        },
    }


def render_matrix_markdown(m: dict[str, Any]) -> str:
    lines = ["| core \\ plugin | " + " | ".join(m["plugins"]) + " |"]
    lines.append("|---" * (len(m["plugins"]) + 1) + "|")
    for core in m["cores"]:
        row = []
        for plugin in m["plugins"]:
            cell = m["cells"].get(f"{core} | {plugin}")
            row.append(f"{cell['verdict']} (#{cell['seq']})" if cell else "")
        lines.append(f"| {core} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def matrix_text(m: dict[str, Any], fmt: str) -> str:
    """The matrix as `vpr manifest ledger --matrix FMT` prints it (markdown or json)."""
    if fmt == "json":
        return json.dumps(m, indent=2, sort_keys=True) + "\n"
    return render_matrix_markdown(m)


def render_lines(entries: Iterable[dict[str, Any]]) -> str:
    """One line per entry, for a terminal or a job summary."""
    out = []
    for e in entries:
        lag = e.get("lag") or {}
        lag_text = f"  lag {lag.get('days')} d / {lag.get('minor_releases')} minor" if lag else ""
        out.append(
            f"#{e.get('seq')} {e.get('time')} {e.get('kind'):<7} {_core_label(e)} + "
            f"{_plugin_label(e)}: {e.get('verdict')} ({e.get('runner')}, py{e.get('python')})"
            f"{lag_text}  manifest sha256:{str(e.get('manifest_sha256'))[:16]}"
        )
    return "\n".join(out)
