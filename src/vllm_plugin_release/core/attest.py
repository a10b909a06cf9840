"""Provenance as data: an in-toto Statement v1 (SLSA provenance v1) in a DSSE envelope, with
this project's keyid, canonical one-line `manifest.intoto.jsonl`, strict checks and pins."""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.cache import canonical_json
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.manifestdoc import MANIFEST_FILE, RuntimePins, validate, wheel_roles

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from vllm_plugin_release.core.manifestmodel import Approval, Manifest

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://vllm-plugin-release.invalid/buildtypes/pairing/v1"
LOCAL_BUILDER = "https://vllm-plugin-release.invalid/builders/local"


def keyid(public_key: Ed25519PublicKey) -> str:
    return hashlib.sha256(public_key.public_bytes_raw()).hexdigest()


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding, byte for byte securesystemslib's, written out so that
    checking a signature does not import securesystemslib's signers."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def _sslib_key(public_key: Ed25519PublicKey) -> Any:
    """The public key for securesystemslib, under this project's keyid (`keyid`), so
    envelopes signed before the library was used keep their keyid and still verify."""
    from securesystemslib.signer import SSlibKey

    return SSlibKey.from_crypto(public_key, keyid=keyid(public_key))


def sign_statement(statement: dict[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import CryptoSigner

    envelope = Envelope(canonical_json(statement).encode(), PAYLOAD_TYPE, {})
    envelope.sign(CryptoSigner(key, _sslib_key(key.public_key())))
    return envelope.to_dict()


def envelope_bytes(envelope: dict[str, Any]) -> bytes:
    return (canonical_json(envelope) + "\n").encode()


def signed_bytes(statement: dict[str, Any], key: Ed25519PrivateKey) -> bytes:
    return envelope_bytes(sign_statement(statement, key))


def sign_pairing(
    manifest: Manifest,
    data: bytes,
    pins: SpecPins,
    key: Ed25519PrivateKey,
    *,
    builder_id: str,
    invocation_id: str | None = None,
) -> bytes:
    """manifest.intoto.jsonl's bytes: the statement over `data` (the manifest's file), signed."""
    statement = build_statement(
        dict(manifest.raw),
        hashlib.sha256(data).hexdigest(),
        pins.to_json(),
        builder_id=builder_id,
        invocation_id=invocation_id,
    )
    return signed_bytes(statement, key)


def _strict_b64(text: Any, what: str, problems: list[str]) -> bytes | None:
    if not isinstance(text, str):
        problems.append(f"{what} is not a string")
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        problems.append(f"{what} is not valid base64")
        return None
    if base64.b64encode(raw).decode() != text:
        problems.append(f"{what} is not canonical base64 (altered)")
        return None
    return raw


def parse_envelope(data: bytes, where: str) -> dict[str, Any]:
    """The envelope in a .intoto.jsonl file; GateFailed unless it is exactly canonical."""
    try:
        envelope = bounded.loads(data)
    except json.JSONDecodeError as exc:
        raise GateFailed(
            f"{where}: the signed envelope is not valid JSON ({exc})",
            hint="the file was altered; rebuild it with `vpr manifest build`",
        )
    if not isinstance(envelope, dict) or envelope_bytes(envelope) != data:
        raise GateFailed(
            f"{where}: the envelope is not in its signed canonical form (altered)",
            hint="rebuild it with `vpr manifest build`",
        )
    return envelope


def unverified_statement(envelope: dict[str, Any], where: str) -> dict[str, Any]:
    """The statement an envelope carries, signature not checked (digests-only verification)."""
    problems: list[str] = []
    payload = _strict_b64(envelope.get("payload"), "payload", problems)
    if payload is None:
        raise GateFailed(f"{where}: " + "; ".join(problems))
    try:
        return bounded.loads(payload)
    except json.JSONDecodeError as exc:
        raise GateFailed(f"{where}: signed payload is not JSON ({exc})")


def _shape_problems(envelope: dict[str, Any]) -> tuple[list[str], bytes | None, list[str]]:
    """(problems, payload, keyids): this project's rules on top of DSSE: exactly the three
    keys, the in-toto payload type, canonical base64, signatures of exactly keyid and sig."""
    problems: list[str] = []
    if set(envelope) != {"payload", "payloadType", "signatures"}:
        problems.append(f"unexpected envelope keys {sorted(envelope)}")
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        problems.append(f"payloadType is {envelope.get('payloadType')!r}, not {PAYLOAD_TYPE!r}")
    payload = _strict_b64(envelope.get("payload"), "payload", problems)
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        problems.append("the envelope carries no signatures")
        signatures = []
    seen: list[str] = []
    for i, sig in enumerate(signatures):
        if not isinstance(sig, dict) or set(sig) != {"keyid", "sig"}:
            problems.append(f"signatures[{i}] is malformed")
            continue
        seen.append(str(sig["keyid"]))
        _strict_b64(sig["sig"], f"signatures[{i}].sig", problems)
    if len(set(seen)) != len(seen):
        problems.append("two signatures under one keyid")
    return problems, payload, seen


def verify_envelope(
    envelope: dict[str, Any], public_key: Ed25519PublicKey, where: str
) -> dict[str, Any]:
    """The statement `envelope` carries, its shape and signature by `public_key` checked."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError

    problems, payload, seen = _shape_problems(envelope)
    want = keyid(public_key)
    if not problems and payload is not None:
        try:
            Envelope.from_dict(copy.deepcopy(envelope)).verify([_sslib_key(public_key)], 1)
        except VerificationError:
            if want in seen:
                problems.append(
                    f"the signature by keyid {want[:16]} does not verify: the payload or the "
                    "signature was altered"
                )
            else:
                problems.append(
                    f"no signature by this key (keyid {want[:16]}); the envelope is signed by "
                    f"keyid {', '.join(k[:16] for k in seen) or 'none'}: wrong key"
                )
    if problems or payload is None:
        raise GateFailed(
            f"{where}: signature check failed:\n  " + "\n  ".join(problems),
            hint="verify with the public key that matches the signing key, or rebuild",
        )
    try:
        statement = bounded.loads(payload)
    except json.JSONDecodeError as exc:
        raise GateFailed(f"{where}: signed payload is not JSON ({exc})")
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise GateFailed(f"{where}: signed payload is not an in-toto Statement v1")
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise GateFailed(f"{where}: predicateType is not {PREDICATE_TYPE}")
    return statement


@dataclass(frozen=True, slots=True)
class Subject:
    name: str
    sha256: str


@dataclass(frozen=True, slots=True)
class Statement:
    """An in-toto statement as its envelope carries it; `raw`: as signed, only to sign or show."""

    type: str | None  # `_type`
    predicate_type: str | None  # `predicateType`
    subjects: tuple[Subject, ...]  # the well-formed subjects, in order
    malformed: tuple[str, ...]  # one problem per malformed subject
    listed: bool  # whether `subject` is a list with anything in it
    raw: dict[str, Any]


def parse_statement(data: object, where: str) -> Statement:
    """The statement of a signed payload; GateFailed unless it is a JSON object."""
    if not isinstance(data, dict):
        raise GateFailed(f"{where}: signed payload is not a JSON object (an in-toto Statement)")
    subjects: list[Subject] = []
    malformed: list[str] = []
    listed = data.get("subject")
    for s in listed if isinstance(listed, list) else []:
        name = s.get("name") if isinstance(s, dict) else None
        digest = s.get("digest") if isinstance(s, dict) else None
        want = digest.get("sha256") if isinstance(digest, dict) else None
        if (
            not isinstance(name, str)
            or not isinstance(want, str)
            or "/" in name
            or name in ("", "..")
        ):
            malformed.append(f"malformed subject {str(s)[:200]}")
            continue
        subjects.append(Subject(name, want))
    kind, predicate = data.get("_type"), data.get("predicateType")
    return Statement(
        kind if isinstance(kind, str) else None,
        predicate if isinstance(predicate, str) else None,
        tuple(subjects),
        tuple(malformed),
        isinstance(listed, list) and bool(listed),
        data,
    )


def read_signed(data: bytes, public_key: Ed25519PublicKey | None, where: str) -> Statement:
    """The statement in a .intoto.jsonl file, its signature checked with `public_key` (None:
    digests only); GateFailed naming `where` and what is wrong."""
    envelope = parse_envelope(data, where)
    if public_key is None:
        return parse_statement(unverified_statement(envelope, where), where)
    return parse_statement(verify_envelope(envelope, public_key, where), where)


def subject_digests(statement: Statement) -> tuple[dict[str, str], list[str]]:
    """({subject name: sha256}, problems) of a statement's subjects."""
    names = {s.name: s.sha256 for s in statement.subjects}
    problems = list(statement.malformed)
    if not names and not problems:
        problems.append("the statement has no subjects")
    return names, problems


def unsigned_wheels(manifest: Manifest, where: str, names: dict[str, str]) -> list[str]:
    """The manifest's wheels that are not signed subjects with the manifest's digest."""
    problems = []
    for part in manifest.parts():
        wheel = part.wheel
        if names.get(wheel.filename) != wheel.sha256:
            problems.append(
                f"{where}: {part.role}.wheel {wheel.filename} sha256 {wheel.sha256} "
                "is not a subject of the signed statement with that digest"
            )
    return problems


def verify_pairing(
    manifest_data: bytes,
    envelope_data: bytes,
    public_key: Ed25519PublicKey,
    where: tuple[str, str],
) -> tuple[Manifest, Statement]:
    """(manifest, statement) of a pairing held as bytes: signed by `public_key`, the manifest
    its subject and valid, each wheel a signed subject; GateFailed lists the problems."""
    manifest_at, statement_at = where
    statement = read_signed(envelope_data, public_key, statement_at)
    names, problems = subject_digests(statement)
    got = hashlib.sha256(manifest_data).hexdigest()
    if names.get(MANIFEST_FILE) != got:
        problems.append(
            f"{manifest_at}: sha256 {got} is not the signed {MANIFEST_FILE} subject "
            f"{names.get(MANIFEST_FILE)}"
        )
        raise GateFailed(
            f"{manifest_at}: verification failed:\n  " + "\n  ".join(problems),
            hint="the manifest is not the one its statement signs; nothing was installed",
        )
    try:
        manifest = bounded.loads(manifest_data)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{manifest_at}:{exc.lineno}: manifest is not valid JSON ({exc.msg})")
    validate(manifest, manifest_at)
    from vllm_plugin_release.core.manifestmodel import parse

    typed = parse(manifest, manifest_at)
    problems += unsigned_wheels(typed, manifest_at, names)
    if problems:
        raise GateFailed(
            f"{manifest_at}: verification failed:\n  " + "\n  ".join(problems),
            hint="something changed after signing; rebuild with `vpr manifest build`",
        )
    return typed, statement


def _sha_digest(value: str | None) -> dict[str, str] | None:
    if not value:
        return None
    value = value.split(":", 1)[1] if value.startswith("sha256:") else value
    return {"sha256": value}


def _source_dependencies(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The core's source (sdist or git) and the plugin's commit."""
    deps: list[dict[str, Any]] = []
    core = manifest["core"]
    src = core["source"]
    if src["kind"] == "sdist":
        deps.append(
            {"name": src["filename"], "uri": src["url"], "digest": {"sha256": src["sha256"]}}
        )
    else:
        ref = f"@refs/tags/{src['tag']}" if src.get("tag") else ""
        deps.append(
            {
                "name": core["name"],
                "uri": f"git+{src['url']}{ref}",
                "digest": {"gitCommit": src["commit"]},
            }
        )
    plugin = manifest["plugin"]
    if plugin.get("commit"):
        deps.append(
            {
                "name": plugin["name"],
                "uri": f"git+{plugin['repository']}",
                "digest": {"gitCommit": plugin["commit"]},
            }
        )
    return deps


def _lock_dependencies(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    locks = (manifest["core"]["build_env"], "build"), (manifest["environment"], "runtime")
    return [
        {
            "name": lock.get("lock_file") or ("build-lock" if role == "build" else "env-lock"),
            "digest": {"sha256": lock["lock_sha256"]},
            "annotations": {"role": f"{role} environment lock"},
        }
        for lock, role in locks
        if lock.get("lock_sha256")
    ]


def _image_and_runtime_dependencies(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The container images built in, and the vendor runtime seen present."""
    deps: list[dict[str, Any]] = []
    container = manifest.get("container")
    if container:
        base = container.get("base_image") or ""
        digest = _sha_digest(container.get("base_digest"))
        if digest:
            deps.append(
                {"name": "base-image", "uri": f"oci://{base.split('@', 1)[0]}", "digest": digest}
            )
        image = _sha_digest(container.get("image_id"))
        if image:
            deps.append({"name": "build-image", "digest": image})
    runtime = manifest["runtime"]
    name = runtime.get("name") or "runtime"
    if runtime.get("status") == "present" and runtime.get("commit"):
        deps.append({"name": name, "digest": {"gitCommit": runtime["commit"]}})
    if runtime.get("status") == "present" and runtime.get("version"):
        deps.append({"name": name, "uri": f"pkg:pypi/{runtime.get('name')}@{runtime['version']}"})
    return deps


def build_statement(
    manifest: dict[str, Any],
    manifest_sha256: str,
    external_parameters: dict[str, Any],
    *,
    builder_id: str,
    invocation_id: str | None = None,
    manifest_name: str = MANIFEST_FILE,
) -> dict[str, Any]:
    """The in-toto Statement (SLSA provenance v1) over the wheels and the manifest. `manifest`:
    the document as written (its `raw`): signing reads the object whose bytes it signs."""
    subjects = [
        {
            "name": manifest[role]["wheel"]["filename"],
            "digest": {"sha256": manifest[role]["wheel"]["sha256"]},
        }
        for role in wheel_roles(manifest)
    ]
    subjects.append({"name": manifest_name, "digest": {"sha256": manifest_sha256}})
    run_details: dict[str, Any] = {
        "builder": {
            "id": builder_id,
            "version": {"vllm-plugin-release": manifest["pipeline"]["version"]},
        },
    }
    if invocation_id:
        run_details["metadata"] = {"invocationId": invocation_id}
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": external_parameters,
                "internalParameters": {
                    "pairing_id": manifest["pairing_id"],
                    "source_date_epoch": manifest["source_date_epoch"],
                    "verdict": manifest["conformance"]["verdict"],
                },
                "resolvedDependencies": [
                    *_source_dependencies(manifest),
                    *_lock_dependencies(manifest),
                    *_image_and_runtime_dependencies(manifest),
                ],
            },
            "runDetails": run_details,
        },
    }


# The spec's pins, as the signed statement holds them (externalParameters); the open
# `[plugin]` and `[runtime]` tables are kept as written (`raw`, signed key by key).


@dataclass(frozen=True, slots=True)
class SdistPin:
    index: str
    filename: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"kind": "sdist", **asdict(self)}


@dataclass(frozen=True, slots=True)
class GitPin:
    url: str
    tag: str
    commit: str

    def to_json(self) -> dict[str, str]:
        return {"kind": "git", **asdict(self)}


@dataclass(frozen=True, slots=True)
class CorePins:
    name: str
    version: str
    target_device: str
    source_date_epoch: int
    source: SdistPin | GitPin

    def to_json(self) -> dict[str, str | int | dict[str, str]]:
        return {**asdict(self), "source": self.source.to_json()}


@dataclass(frozen=True, slots=True)
class BuildPins:
    python: str
    backend: str
    base_image: str | None
    torch: str
    constraints: str

    def to_json(self) -> dict[str, str | None]:
        return asdict(self)


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
    """The spec's pins, signed as the statement's `externalParameters` (`to_json`); a table
    the spec lacks is None (signed as `{}` and `null`; no `api_approval` key)."""

    name: str
    core: CorePins
    plugin: PluginTable | None
    runtime: RuntimeTable | None
    build: BuildPins
    api_approval: Approval | None = None

    def to_json(self) -> dict[str, Any]:
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
