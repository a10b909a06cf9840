"""The comparison: the running environment against what `vpr install` certified.

`ENV/vpr-guard/` holds the verified manifest, its statement, the pairing's lock and
`certified.json`: the manifest's sha256 (verified with the publisher's key through the
store's signed head when `vpr install` ran, and checked again here), the recovery command,
and the snapshot taken once the environment matched every pin: each distribution's
version and RECORD sha256, and the size and time of every file of the core, the plugin
and the guard. Every difference is a finding (a distribution from outside the
environment's site-packages, and code of the core, plugin or guard imported from anywhere
but their certified files, included); the policy says what vLLM does with them.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from vpr_guard import (
    CERTIFIED,
    CERTIFIED_KIND,
    MANIFEST,
    POLICIES,
    POLICY,
    POLICY_ENV,
    STATE_DIR,
    scan,
)

LISTED = 5  # changed files named per distribution
MAX_STATE = 64 * 1024 * 1024  # certified.json / manifest.json are read up to this size


@dataclass(frozen=True)
class Finding:
    kind: str  # missing | version | build | files | extra | platform | state
    name: str  # the distribution (canonical), or "" for platform/state
    text: str


@dataclass
class State:
    """What `vpr install` left in ENV/vpr-guard/ (manifest and certified.json), or why
    it cannot be used (`problems`)."""

    prefix: str
    folder: str
    manifest: dict[str, Any] = field(default_factory=dict)
    certified: dict[str, Any] = field(default_factory=dict)
    problems: list[Finding] = field(default_factory=list)
    damaged: str = ""  # the file (or folder) of the record that cannot be used

    def unusable(self, path: str, text: str) -> State:
        self.damaged = self.damaged or path
        self.problems.append(Finding("state", "", text))
        return self

    @property
    def verdict(self) -> str | None:
        verdict = (self.manifest.get("conformance") or {}).get("verdict")
        return verdict if isinstance(verdict, str) else None

    @property
    def recover(self) -> str:
        line = self.certified.get("recover")
        if isinstance(line, str) and line:
            return line
        pid = str(self.manifest.get("pairing_id") or "PAIRING_ID")[:16]
        return f"vpr install {pid} --python-env {self.prefix}"


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read(MAX_STATE + 1)
    if len(data) > MAX_STATE:
        raise ValueError(f"larger than {MAX_STATE} bytes")
    return data


class Damaged(ValueError):
    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"{path}: {what}")
        self.path = path


def _load(path: str) -> tuple[bytes, Any]:
    """The bytes of one file of the record and its JSON; Damaged naming the file and what
    is wrong with it (missing, unreadable, truncated or not JSON)."""
    try:
        data = _read(path)
    except FileNotFoundError:
        raise Damaged(path, "missing") from None
    except (OSError, ValueError) as exc:
        raise Damaged(path, f"cannot be read ({exc})") from None
    try:
        return data, json.loads(data)
    except ValueError as exc:
        raise Damaged(path, f"truncated or not JSON ({exc})") from None


def load_state(prefix: str | None = None) -> State:
    prefix = prefix or sys.prefix
    folder = os.path.join(prefix, STATE_DIR)
    state = State(prefix=prefix, folder=folder)
    if not os.path.isdir(folder):
        return state.unusable(
            folder,
            f"{folder}: no certified pairing here (this environment was not made by `vpr "
            "install`, or its record was removed)",
        )
    loaded = {}
    for name in (MANIFEST, CERTIFIED):
        try:
            loaded[name] = _load(os.path.join(folder, name))
        except Damaged as exc:
            state.unusable(exc.path, str(exc))
    manifest_bytes, manifest = loaded.get(MANIFEST, (b"", {}))
    certified = loaded.get(CERTIFIED, (b"", {}))[1]
    path = os.path.join(folder, CERTIFIED)
    if CERTIFIED in loaded and (
        not isinstance(certified, dict) or certified.get("kind") != CERTIFIED_KIND
    ):
        state.unusable(path, f"{path}: not a vpr-guard record")
    else:
        state.certified = certified  # its recovery line, even beside a damaged manifest
    path = os.path.join(folder, MANIFEST)
    if not isinstance(manifest, dict):
        state.unusable(path, f"{path}: not a manifest")
    else:
        state.manifest = manifest
    if state.damaged:
        return state
    have = hashlib.sha256(manifest_bytes).hexdigest()
    if have != certified.get("manifest_sha256"):
        state.unusable(
            path,
            f"{path}: sha256 {have[:16]} is not the manifest vpr install verified "
            f"({str(certified.get('manifest_sha256'))[:16]})",
        )
    return state


class BadPolicy(ValueError):
    pass


def resolve_policy(state: State) -> tuple[str, str]:
    """(policy, where it came from): $VPR_GUARD, else the first word of ENV/vpr-guard/policy,
    else warn for a pilot or lab verdict and enforce for any other. A record that cannot be
    used has no verdict to go by: enforce (a damaged record must not let vLLM start quietly
    where the verdict said enforce). BadPolicy for a value that is none of enforce, warn,
    off (the guard then refuses: it does not guess)."""
    value = os.environ.get(POLICY_ENV, "").strip()
    if value:
        if value.lower() not in POLICIES:
            raise BadPolicy(f"{POLICY_ENV}={value!r} is not one of {', '.join(POLICIES)}")
        return value.lower(), POLICY_ENV
    path = os.path.join(state.folder, POLICY)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            words = f.read(256).split()
    except OSError:
        words = None
    if words is not None:
        word = words[0].lower() if words else ""
        if word not in POLICIES:
            raise BadPolicy(f"{path}: {word!r} is not one of {', '.join(POLICIES)}")
        return word, path
    if state.damaged:
        return "enforce", "the default when the certified record cannot be used"
    verdict = state.verdict
    if verdict in ("pilot", "lab"):
        return "warn", f"the default for verdict {verdict}"
    return "enforce", f"the default for verdict {verdict}"


def _labels(state: State) -> dict[str, str]:
    roles = state.certified.get("roles")
    if not isinstance(roles, dict):
        return {}
    return {scan.canonical(str(n)): str(r) for r, n in roles.items() if isinstance(n, str)}


def _who(labels: dict[str, str], name: str) -> str:
    role = labels.get(name)
    return f"{role} {name}" if role and role != name else name


def _signed_files(state: State) -> dict[str, tuple[str, str]]:
    """{canonical name: (files_sha256, wheel file)} the signed manifest certifies."""
    out = {}
    for role in ("core", "plugin", "guard"):
        part = state.manifest.get(role)
        if isinstance(part, dict) and isinstance(part.get("wheel"), dict):
            wheel = part["wheel"]
            out[scan.canonical(str(part.get("name")))] = (
                str(wheel.get("files_sha256")),
                str(wheel.get("filename")),
            )
    return out


def _dist_findings(
    state: State, installed: dict[str, dict[str, str]], paths: list[str] | None
) -> list[Finding]:
    labels = _labels(state)
    certified = state.certified.get("dists") or {}
    found: list[Finding] = []
    for _, now in sorted(installed.items()):
        if now.get("outside"):
            name = scan.canonical(now["name"])
            who = _who(labels, name) if name in certified else f"extra {name}"
            text = (
                f"{who} {now['version']}: in {now['folder']} ({now['outside']} "
                f"{scan.added_by(now['entry'])}), outside the environment's site-packages: "
                "take it off sys.path"
            )
            found.append(Finding("path", name, text))
    for name, want in sorted(certified.items(), key=lambda kv: (kv[0] not in labels, kv[0])):
        who, now = _who(labels, name), installed.get(name)
        if now is not None and now.get("outside"):
            continue  # named above
        if now is None:
            text = f"{who} {want['version']}: missing (certified, not installed)"
            found.append(Finding("missing", name, text))
        elif now["version"] != want["version"]:
            text = f"{who}: installed {now['version']}, certified {want['version']}"
            found.append(Finding("version", name, text))
        else:
            found += _build_findings(state, name, who, now, want, paths)
    for name in sorted(set(installed) - set(certified)):
        if installed[name].get("outside"):
            continue
        text = f"extra {name} {installed[name]['version']}: installed, not in the certified set"
        found.append(Finding("extra", name, text))
    return found


def _build_findings(
    state: State,
    name: str,
    who: str,
    now: dict[str, str],
    want: dict[str, Any],
    paths: list[str] | None,
) -> list[Finding]:
    """Another build under the certified version (its RECORD differs; for the core, the
    plugin and the guard, named against the signed files_sha256), files changed in place
    since vpr install (size or time), or their code imported from elsewhere."""
    data = scan.record_bytes(now["folder"])
    digest = hashlib.sha256(data).hexdigest() if data is not None else None
    if digest != want.get("record"):
        signed = _signed_files(state).get(name)
        have = scan.files_sha256(data) if signed and data is not None else None
        if signed and have != signed[0]:
            text = (
                f"{who} {now['version']}: its installed files are not those of the certified "
                f"wheel {signed[1]} (files_sha256 {str(have)[:16]}, signed {signed[0][:16]})"
            )
        else:
            text = (
                f"{who} {now['version']}: another build is installed (its RECORD is not the "
                "one vpr install certified)"
            )
        return [Finding("build", name, text)]
    stats = (state.certified.get("files") or {}).get(name)
    if not isinstance(stats, dict):
        return []
    have_stats = scan.file_stats(now["folder"], list(stats))
    found = [] if have_stats == stats else _changed_files(who, name, stats, have_stats)
    return found + _import_findings(who, name, now["folder"], stats, paths)


def _import_findings(
    who: str, name: str, info: str, files: dict[str, Any], paths: list[str] | None
) -> list[Finding]:
    """Where Python imports each top-level module of a certified distribution from: only
    its certified files count (its RECORD, as vpr install snapshot it). A copy on
    PYTHONPATH, a source tree in the working folder, an import hook: each one a finding."""
    site = os.path.realpath(os.path.dirname(info))
    found = []
    for top in scan.top_level(files):
        where, why = scan.resolve(top, paths)
        bad = [w for w in where if not _certified_file(w, site, top, files)]
        if why is not None:
            text = f"{who}: {top} {why}, not from its certified files in {site}"
        elif bad:
            text = (
                f"{who}: Python imports {top} from {os.path.realpath(bad[0])} "
                f"({_home(bad[0], top, paths)}), not its certified files in {site}"
            )
        else:
            continue
        found.append(Finding("imports", name, text))
    return found


def _certified_file(path: str, site: str, top: str, files: dict[str, Any]) -> bool:
    """Whether `path` (a module's file, or a package's folder) is one of the certified files
    in `site` (or the folder that holds them)."""
    real = os.path.realpath(path)
    if not real.startswith(site + os.sep):
        return False
    relative = real[len(site) + 1 :].replace(os.sep, "/")
    return relative in files or (relative == top and any(p.startswith(top + "/") for p in files))


def _home(path: str, top: str, paths: list[str] | None) -> str:
    """How the sys.path entry that holds `path` (a file or the folder of `top`) came there."""
    head = path
    while os.path.basename(head).split(".", 1)[0] != top:
        parent = os.path.dirname(head)
        if parent == head:
            return "not from sys.path: an import hook"
        head = parent
    entry = scan.entry_of(os.path.dirname(head), paths)
    return "not from sys.path: an import hook" if entry is None else scan.added_by(entry)


def _changed_files(who: str, name: str, want: dict[str, Any], have: dict[str, list[int]]):
    changed = sorted(p for p in set(want) | set(have) if want.get(p) != have.get(p))
    if not changed:
        return []
    shown = ", ".join(changed[:LISTED]) + (
        f" and {len(changed) - LISTED} more" if len(changed) > LISTED else ""
    )
    return [
        Finding("files", name, f"{who}: {len(changed)} file(s) changed since vpr install ({shown})")
    ]


def platform_finding(state: State, resolved: str | None, error: str | None) -> list[Finding]:
    """The platform class vLLM resolved against the one the pairing was certified with."""
    want = (state.manifest.get("platform") or {}).get("resolved")
    if not isinstance(want, str) or not want:
        return []  # a manifest that records none (written before the guard): not compared
    if error is not None:
        return [
            Finding(
                "platform",
                "",
                f"platform: resolving vLLM's platform raised {error}; certified {want}",
            )
        ]
    if resolved != want:
        text = (
            f"platform: vLLM resolved {resolved}, certified {want} (what vLLM resolves follows "
            "what is importable: the vendor runtime, PYTHONPATH, VLLM_PLUGINS)"
        )
        return [Finding("platform", "", text)]
    return []


def compare(
    state: State, paths: list[str] | None = None, sites: list[str] | None = None
) -> list[Finding]:
    """Every difference between the environment and its certified record (the platform
    is the caller's: only a process running vLLM knows it). `paths` and `sites`: another
    sys.path and site-packages than this process's (`scan.distributions`)."""
    if state.problems:
        return list(state.problems)
    return _dist_findings(state, scan.distributions(paths, sites), paths)


def describe(state: State) -> str:
    m = state.manifest
    core, plugin = m.get("core") or {}, m.get("plugin") or {}
    commit = f" @ {str(plugin['commit'])[:12]}" if plugin.get("commit") else ""
    return (
        f"pairing {str(m.get('pairing_id'))[:16]} ({core.get('name')} {core.get('version')} + "
        f"{plugin.get('name')} {plugin.get('version')}{commit}, verdict {state.verdict})"
    )


def message(state: State, findings: list[Finding], policy: str, source: str) -> str:
    """One message: what differs, how to get back, and what the policy does (`check`: the
    shell's `python -m vpr_guard check`, which applies none)."""
    if state.damaged and state.damaged != state.folder:
        what = "the certified record of this environment cannot be used"
    elif state.manifest:
        what = f"this environment is not the certified {describe(state)}"
    else:
        what = "this environment has no certified pairing"
    head = {
        "enforce": f"vpr-guard: vLLM will not start: {what}:",
        "warn": f"vpr-guard: WARNING: vLLM starts in an environment that is not certified: {what}:",
        "check": f"vpr-guard: {what}:",
    }[policy]
    lines = [head, *(f"  - {f.text}" for f in findings)]
    lines.append(f"to get back to the certified set: {state.recover}")
    if policy == "enforce":
        lines.append(
            f"(policy enforce, from {source}; VPR_GUARD=warn starts it anyway with this "
            "warning, VPR_GUARD=off skips the check)"
        )
    elif policy == "warn":
        lines.append(f"(policy warn, from {source}; VPR_GUARD=enforce refuses to start instead)")
    return "\n".join(lines)
