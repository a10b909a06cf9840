"""Consumer-side checks of a pairing: does a manifest folder verify, does an installed
environment match a manifest."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core import attest, bounded
from vllm_plugin_release.core.cache import sha256_file
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.lockfile import same_version
from vllm_plugin_release.core.manifestdoc import (
    MANIFEST_FILE,
    STATEMENT_FILE,
    read_document,
    validate,
)
from vllm_plugin_release.core.manifestmodel import Manifest, Part, Wheel, parse
from vllm_plugin_release.core.wheelfacts import files_digest, installed_files, wheel_files
from vllm_plugin_release.edges.envrun import InstalledDist, probe_environment, probe_with_installed
from vllm_plugin_release.edges.keys import load_public_key

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

# A manifest folder


@dataclass
class Verified:
    manifest_path: Path
    statement_path: Path
    keyid: str | None
    manifest: Manifest
    statement: attest.Statement
    subjects: list[dict[str, Any]] = field(default_factory=list)


def locate(path: Path) -> tuple[Path, Path]:
    """(manifest.json, manifest.intoto.jsonl) for a path naming either of them or their folder."""
    if path.is_dir():
        return path / MANIFEST_FILE, path / STATEMENT_FILE
    if path.name.endswith(".intoto.jsonl"):
        return path.with_name(path.name[: -len(".intoto.jsonl")] + ".json"), path
    return path, path.with_name(path.stem + ".intoto.jsonl")


def verify_files(path: Path, public_key: Path | None, *, manifest_only: bool = False) -> Verified:
    """Check signature (with a key), subject digests (the wheels beside the manifest unless
    `manifest_only`) and schema; GateFailed lists every mismatch, a missing input is BadInput."""
    manifest_path, statement_path = locate(path)
    if not path.exists() or not manifest_path.exists():
        raise BadInput(
            f"{manifest_path}: no such file",
            hint="run a release first (`vpr release --spec FILE` writes dist/NAME/manifest.json), "
            "or pass the manifest of an earlier one",
        )
    key = load_public_key(public_key) if public_key else None
    statement = _read_statement(manifest_path, statement_path, key)
    if not statement.listed:
        raise GateFailed(f"{statement_path}: the statement has no subjects")
    names, report, problems = _check_subjects(statement, manifest_path, manifest_only)
    if MANIFEST_FILE not in names:
        problems.append(f"{MANIFEST_FILE} is not a subject of {statement_path.name}")
    manifest_ok = MANIFEST_FILE in names and all(
        r["ok"] for r in report if r["name"] == MANIFEST_FILE
    )
    manifest: Manifest | None = None
    if manifest_ok:
        data = read_document(manifest_path, "manifest")
        validate(data, str(manifest_path))  # newer schema_version: a clear BadInput
        manifest = parse(data, str(manifest_path))
        problems += attest.unsigned_wheels(manifest, str(manifest_path), names)
    if problems or manifest is None:
        raise GateFailed(
            f"{manifest_path}: verification failed:\n  " + "\n  ".join(problems),
            hint=_verify_hint(report, problems, manifest_only),
        )
    keyid = attest.keyid(key) if key is not None else None
    return Verified(manifest_path, statement_path, keyid, manifest, statement, report)


def _verify_hint(report: list[dict[str, Any]], problems: list[str], manifest_only: bool) -> str:
    """What to do next: only wheels absent (a store entry) is no tampering: check the manifest."""
    missing = [r for r in report if r.get("problem") == "missing"]
    if not manifest_only and missing and len(missing) == len(problems):
        return (
            "the wheels are not next to this manifest (a store entry?): pass --manifest-only to "
            "check the signature and the manifest alone, or verify the release's dist/NAME/ folder"
        )
    return "something changed after signing; rebuild with `vpr manifest build`"


def _read_statement(
    manifest_path: Path, statement_path: Path, key: Ed25519PublicKey | None
) -> attest.Statement:
    """The signed statement next to the manifest; its signature checked when `key` is given."""
    if not statement_path.exists():
        raise GateFailed(
            f"{statement_path}: signed statement missing next to {manifest_path.name}",
            hint="`vpr manifest build` writes it; an unsigned manifest cannot be verified",
        )
    data = bounded.read_file(statement_path, bounded.MAX_DOCUMENT, "signed statement")
    # without a key, digests only (publish re-checks its own output with no public key at hand)
    return attest.read_signed(data, key, str(statement_path))


def _check_subjects(
    statement: attest.Statement, manifest_path: Path, manifest_only: bool
) -> tuple[dict[str, str], list[dict[str, Any]], list[str]]:
    """({subject name: sha256}, one report line per subject, problems) for the files found."""
    names, problems = attest.subject_digests(statement)
    report: list[dict[str, Any]] = []
    folder = manifest_path.parent
    for name, want in names.items():
        file = manifest_path if name == MANIFEST_FILE else folder / name
        if manifest_only and name != MANIFEST_FILE:
            report.append({"name": name, "sha256": want, "ok": True, "problem": "not checked"})
            continue
        if not file.is_file():
            problems.append(f"{file}: subject file missing (expected sha256 {want})")
            report.append({"name": name, "sha256": want, "ok": False, "problem": "missing"})
            continue
        got = sha256_file(file)
        ok = got == want
        if not ok:
            problems.append(f"{file}: sha256 {got} does not match the signed subject {want}")
        report.append(
            {"name": name, "sha256": want, "ok": ok, **({} if ok else {"problem": f"sha256 {got}"})}
        )
    return names, report, problems


# An installed environment


def lock_pins(manifest: Manifest, lock_text: str) -> dict[str, str]:
    """Every pin of the pairing: the lock's, then the manifest's parts at their versions."""
    from vllm_plugin_release.core.lockfile import pins

    out = pins(lock_text)
    for part in manifest.parts():
        out[part.name] = part.wheel.version
    return out


def find_lock(
    manifest_path: Path, manifest: Manifest, given: Path | None
) -> tuple[str | None, Path | None]:
    """(text, path) of the pairing lock for `check-env` (`given`, the store's, or the manifest's
    lock_file) when its sha256 is the signed one, else (None, None)."""
    from vllm_plugin_release.core.storeindex import LOCK_SUFFIX, check_lock

    candidates = [given] if given else []
    if not given:
        candidates.append(manifest_path.with_name(manifest_path.stem + LOCK_SUFFIX))
        lock_file = manifest.environment.lock_file
        if lock_file:
            candidates.append(Path(lock_file))
    for path in candidates:
        try:
            data = bounded.read_file(path, bounded.MAX_DOCUMENT, "pairing lock")
        except FileNotFoundError:
            if given:
                raise BadInput(f"--lock {path}: not found")
            continue
        return check_lock(manifest, data, str(path)), path
    return None, None


def check_environment(
    manifest: Manifest,
    python: Path | str,
    wheels_dir: Path | None = None,
    lock_text: str | None = None,
) -> list[str]:
    """Every way the environment differs from the manifest; with `lock_text`, every pin too."""
    parts = manifest.parts()
    names = [p.name for p in parts]
    mismatches: list[str] = []
    if lock_text is None:
        found = probe_environment(python, names)
    else:
        from vllm_plugin_release.core.lockfile import drift

        found, installed = probe_with_installed(python, names)
        mismatches += drift(lock_pins(manifest, lock_text), installed).lines()
    for want in parts:
        role, name, version = want.role, want.name, want.wheel.version
        got = found.get(name)
        if got is None:
            mismatches.append(f"{role} {name}: not installed (manifest: {version})")
            continue
        where = f"{role} {name} ({got.location})"
        if not same_version(got.version, version):
            mismatches.append(f"{where}: version {got.version}, manifest {version}")
        for path, problem in got.bad:
            mismatches.append(f"{where}: {path} {problem} since installation (RECORD hash)")
        mismatches += _wheel_mismatches(where, want.wheel, got, wheels_dir)
        if role == "plugin":
            mismatches += _entry_point_mismatches(where, want, got)
    return mismatches


def _wheel_mismatches(
    where: str, wheel: Wheel, got: InstalledDist, wheels_dir: Path | None
) -> list[str]:
    """The installed files (and the wheel they came from) against the certified wheel."""
    mismatches = []
    hashes = got.archive_hashes
    if "sha256" in hashes and hashes["sha256"] != wheel.sha256:
        mismatches.append(
            f"{where}: installed from a wheel with sha256 {hashes['sha256']}, "
            f"manifest {wheel.sha256}"
        )
    files = installed_files(got.record)
    if files_digest(files) != wheel.files_sha256:
        detail = _file_differences(files, wheels_dir, wheel)
        mismatches.append(
            f"{where}: installed files differ from the certified wheel {wheel.filename}"
            + (
                ":\n    " + "\n    ".join(detail)
                if detail
                else f" ({len(files)} files installed, {wheel.files} in the wheel; pass "
                "--wheels DIR holding the wheel for a file-by-file list)"
            )
        )
    return mismatches


def _entry_point_mismatches(where: str, want: Part, got: InstalledDist) -> list[str]:
    mismatches = []
    for group, eps in sorted(want.entry_points.items()):
        have = got.entry_points.get(group, {})
        for ep_name, value in sorted(eps.items()):
            if have.get(ep_name) != value:
                mismatches.append(
                    f"{where}: entry point [{group}] {ep_name} = "
                    f"{have.get(ep_name)!r}, manifest {value!r}"
                )
    return mismatches


def _file_differences(
    files: dict[str, str], wheels_dir: Path | None, wheel: Wheel, limit: int = 20
) -> list[str]:
    if wheels_dir is None:
        return []
    path = wheels_dir / wheel.filename
    if not path.is_file() or sha256_file(path) != wheel.sha256:
        return []
    expected = wheel_files(path)
    lines = []
    for p in sorted(set(expected) | set(files)):
        if p not in files:
            lines.append(f"{p}: missing from the installation")
        elif p not in expected:
            lines.append(f"{p}: installed but not in the certified wheel")
        elif files[p] != expected[p]:
            lines.append(f"{p}: installed {files[p]}, certified wheel {expected[p]}")
    if len(lines) > limit:
        lines = [*lines[:limit], f"... and {len(lines) - limit} more"]
    return lines
