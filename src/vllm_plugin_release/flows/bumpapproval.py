"""The API coupling part of `vpr bump`: the plugin's uses of the core API against the
pinned core and the new one (`conform.lib.apicoupling`), and the approval on record that a
breaking change needs before the bump can go on.

Without an approval that names every breaking change (who, why, which), the bump stops
with exit 1 saying what to approve, and writes nothing (`--dry-run` prints its report and
exits 1 too). With one, the new spec carries it as `[core.api_approval]`; `vpr manifest
build` signs it into the manifest (`api_approval`) and `vpr manifest site` shows it. A bump
with no breaking change removes an approval left from an earlier bump: an approval belongs
to the move it approves (the spec loader refuses one whose `to` is not the pinned core).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.errors import BadInput, GateFailed, VprError


@dataclass(frozen=True)
class Approval:
    """What `--approve-by`, `--approve-why` and `--approve ID` said."""

    by: str
    why: str
    changes: tuple[str, ...]


def approval_from(by: str | None, why: str | None, ids: list[str] | None) -> Approval | None:
    """The approval the command line gives, or None; BadInput when it is incomplete."""
    if not (by or why or ids):
        return None
    missing = [flag for flag, value in (("--approve-by", by), ("--approve-why", why),
                                        ("--approve", ids)) if not value]  # fmt: skip
    if missing or not (by or "").strip() or not (why or "").strip():
        raise BadInput(
            f"an approval needs who, why and which changes: {', '.join(missing) or 'a value'} "
            "missing",
            hint="--approve-by 'NAME <EMAIL>' --approve-why 'WHAT THE PLUGIN DID' --approve ID "
            "(one --approve per change the migration report lists)",
        )
    return Approval(str(by).strip(), str(why).strip(), tuple(sorted(set(ids or ()))))


def coupling(
    plugin_root: Path | None,
    old_tree: Path,
    new_tree: Path,
    errors: list[VprError],
    *,
    versions: tuple[str, str] | None = None,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """The report's `api_coupling` part (`not run` for a spec without a plugin). `versions`
    name the two cores in its details; `cache_dir` keeps the core modules' parsed facts."""
    from vllm_plugin_release.conform.lib.apicoupling import coupling as diff

    if plugin_root is None:
        return {"status": "not run", "reason": "the spec has no [plugin]"}
    with progress.status("bump: the core API the plugin uses, old vs new"):
        try:
            report = diff(plugin_root, old_tree, new_tree, versions=versions, cache_dir=cache_dir)
            return report.to_json()
        except OSError as exc:
            error = BadInput(f"{plugin_root}: cannot read the plugin's source ({exc})")
            errors.append(error)
            return {"status": "error", "reason": error.message}


def _command(spec_path: Path, version: str, ids: list[str]) -> str:
    approve = " ".join(f"--approve {shlex.quote(i)}" for i in ids)
    return (
        f"vpr bump --spec {shlex.quote(str(spec_path))} --core {version} --approve-by "
        f"'NAME <EMAIL>' --approve-why 'WHAT THE PLUGIN DID ABOUT IT' {approve}"
    )


def decide(
    report: dict[str, Any], approval: Approval | None, spec_path: Path, old: str, new: str
) -> dict[str, Any] | None:
    """The `[core.api_approval]` table the new spec gets (None: none). Sets the report's
    `approval` part. GateFailed naming what to approve when a breaking change has no
    approval; BadInput when the approval names a change this bump does not have."""
    breaking = [c["id"] for c in report.get("changes") or []]
    if approval is not None:
        unknown = sorted(set(approval.changes) - set(breaking))
        if unknown:
            raise BadInput(
                f"--approve {', '.join(unknown)}: not a breaking change of this bump ("
                + (", ".join(breaking) or "it has none")
                + ")",
                hint="approve the ids the migration report's API coupling section lists",
            )
    if not breaking:
        report["approval"] = {"status": "not needed"}
        return None
    missing = sorted(set(breaking) - set(approval.changes if approval else ()))
    if missing:
        report["approval"] = {"status": "missing", "needed": missing,
                              "command": _command(spec_path, new, missing)}  # fmt: skip
        return None
    assert approval is not None
    table = {"from": old, "to": new, "by": approval.by, "why": approval.why,
             "changes": list(approval.changes)}  # fmt: skip
    report["approval"] = {"status": "approved", **table}
    return table


def stop(report: dict[str, Any]) -> GateFailed | None:
    """The error that stops the bump when a breaking change lacks its approval."""
    approval = report.get("approval") or {}
    if approval.get("status") != "missing":
        return None
    changes = {c["id"]: c for c in report.get("changes") or []}
    lines = [
        f"{cid}: {changes[cid]['detail']} (plugin: {', '.join(changes[cid]['uses'][:3])})"
        for cid in approval["needed"]
    ]
    return GateFailed(
        f"the new core breaks the core API the plugin uses in {len(lines)} way(s); the bump "
        "needs an approval on record before it can publish (nothing was written):\n  "
        + "\n  ".join(lines),
        hint=f"after reviewing them (and fixing the plugin): {approval['command']}",
    )


def edit(document: tomlkit.TOMLDocument, table: dict[str, Any] | None) -> dict[str, Any]:
    """Put the approval into the spec's [core] (or take a stale one out); what changed."""
    core = document["core"]
    before = core.get("api_approval")
    before = before.unwrap() if hasattr(before, "unwrap") else before
    if table is None:
        if before is None:
            return {}
        del core["api_approval"]
        return {"core.api_approval": {"from": before, "to": None}}
    new = tomlkit.table()
    for key in ("from", "to", "by", "why"):
        new[key] = table[key]
    changes = tomlkit.array()
    changes.extend(table["changes"])
    changes.multiline(True)
    new["changes"] = changes
    core["api_approval"] = new
    return {"core.api_approval": {"from": before, "to": table}}
