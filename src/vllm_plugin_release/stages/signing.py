"""Provenance and signature: an in-toto Statement v1 with an SLSA provenance v1
predicate, wrapped in a DSSE envelope signed with an ed25519 key.

Files next to the manifest in dist/NAME/:
  manifest.intoto.jsonl   one line: the DSSE envelope as canonical JSON

Keys are PEM files: PKCS#8 private key (mode 0600), SubjectPublicKeyInfo public
key next to it as `KEY.pub`. The private key is only ever named by its path: no
log line, manifest, or error message contains its bytes. An encrypted private
key is opened with the passphrase in $VPR_SIGNING_KEY_PASSWORD.

Verification is strict: the envelope file must be byte-for-byte the canonical
form of what it parses to, the signature's keyid must be the given key's, and
every subject's sha256 must match the file of that name next to the manifest.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core.cache import atomic_write_bytes, canonical_json, sha256_file
from vllm_plugin_release.core.errors import BadInput, GateFailed

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://vllm-plugin-release.invalid/buildtypes/pairing/v1"
LOCAL_BUILDER = "https://vllm-plugin-release.invalid/builders/local"
KEY_ENV = "VPR_SIGNING_KEY"
PASSWORD_ENV = "VPR_SIGNING_KEY_PASSWORD"
DEFAULT_KEY = Path("keys") / "manifest-signing.key"  # under the .vpr/ cache folder


# ---------------------------------------------------------------------------
# Keys


def public_path(private: Path) -> Path:
    return private.with_name(private.name + ".pub")


def generate_keypair(
    private: Path, *, force: bool = False, encrypt: bool = False
) -> tuple[Path, Path]:
    """Write a new ed25519 key pair: `private` (0600) and `private.pub`. Returns both paths."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pub = public_path(private)
    if not force and (private.exists() or pub.exists()):
        raise BadInput(
            f"{private}: a key already exists there",
            hint="pass --force to replace it (manifests signed with the old key will no longer "
            "verify with the new public key), or choose another --out",
        )
    encryption: serialization.KeySerializationEncryption = serialization.NoEncryption()
    if encrypt:
        password = os.environ.get(PASSWORD_ENV)
        if not password:
            raise BadInput(f"--encrypt needs the passphrase in ${PASSWORD_ENV}")
        encryption = serialization.BestAvailableEncryption(password.encode())
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(private, private_pem)  # mkstemp creates it 0600
    os.chmod(private, 0o600)
    atomic_write_bytes(pub, public_pem)
    os.chmod(pub, 0o644)
    return private, pub


def load_private_key(path: Path) -> Ed25519PrivateKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(
            f"{path}: signing key not found",
            hint="create one with `vpr keys generate --out PATH`, then point --signing-key, "
            f"${KEY_ENV} or [publish] signing_key at it",
        )
    except OSError as exc:
        raise BadInput(f"{path}: cannot read signing key ({exc.strerror})")
    password = os.environ.get(PASSWORD_ENV)
    try:
        key = serialization.load_pem_private_key(
            data, password=password.encode() if password else None
        )
    except TypeError:
        raise BadInput(
            f"{path}: signing key is encrypted", hint=f"put its passphrase in ${PASSWORD_ENV}"
        )
    except ValueError:
        # Deliberately no detail: the library's message could quote key material.
        raise BadInput(
            f"{path}: not a readable PEM private key (or wrong passphrase)",
            hint="`vpr keys generate` writes a PKCS#8 ed25519 key",
        )
    if not isinstance(key, Ed25519PrivateKey):
        raise BadInput(f"{path}: signing key is not an ed25519 key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"{path}: public key not found", hint="pass the KEY.pub file")
    except OSError as exc:
        raise BadInput(f"{path}: cannot read public key ({exc.strerror})")
    if b"PRIVATE KEY" in data:
        raise BadInput(
            f"{path}: this is a private key; verification takes the public key",
            hint=f"pass {public_path(path).name} (written next to it by `vpr keys generate`)",
        )
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        raise BadInput(f"{path}: not a PEM public key", hint="pass the KEY.pub file")
    if not isinstance(key, Ed25519PublicKey):
        raise BadInput(f"{path}: public key is not an ed25519 key")
    return key


def keyid(public_key: Ed25519PublicKey) -> str:
    """sha256 of the raw 32-byte public key, hex."""
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def resolve_key_path(
    cli: str | Path | None, spec_value: str | None, *, root: Path, cache_root: Path
) -> tuple[Path, str]:
    """Which signing key to use and why: --signing-key, $VPR_SIGNING_KEY, spec, or the default.

    Relative spec paths are resolved against the project root. The default is
    `.vpr/keys/manifest-signing.key` (created on first use by `ensure_key`).
    """
    if cli:
        return Path(cli), "--signing-key"
    env = os.environ.get(KEY_ENV)
    if env:
        return Path(env), f"${KEY_ENV}"
    if spec_value:
        p = Path(spec_value)
        return (p if p.is_absolute() else root / p), "[publish] signing_key"
    return cache_root / DEFAULT_KEY, "default"


def ensure_key(path: Path, origin: str) -> bool:
    """Create the default key if it is missing; True when a key was created."""
    if origin == "default" and not path.exists():
        generate_keypair(path)
        return True
    return False


# ---------------------------------------------------------------------------
# DSSE


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def sign_statement(statement: dict[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    payload = canonical_json(statement).encode()
    signature = key.sign(pae(PAYLOAD_TYPE, payload))
    return {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [
            {"keyid": keyid(key.public_key()), "sig": base64.b64encode(signature).decode()}
        ],
    }


def envelope_bytes(envelope: dict[str, Any]) -> bytes:
    return (canonical_json(envelope) + "\n").encode()


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
        envelope = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
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


def verify_envelope(
    envelope: dict[str, Any], public_key: Ed25519PublicKey, where: str
) -> dict[str, Any]:
    """Check the DSSE signature with `public_key`; return the statement it carries."""
    from cryptography.exceptions import InvalidSignature

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
    want = keyid(public_key)
    matched = False
    seen: list[str] = []
    for i, sig in enumerate(signatures):
        if not isinstance(sig, dict) or set(sig) != {"keyid", "sig"}:
            problems.append(f"signatures[{i}] is malformed")
            continue
        seen.append(str(sig["keyid"]))
        raw = _strict_b64(sig["sig"], f"signatures[{i}].sig", problems)
        if sig["keyid"] != want or raw is None or payload is None:
            continue
        try:
            public_key.verify(raw, pae(str(envelope.get("payloadType")), payload))
            matched = True
        except InvalidSignature:
            problems.append(
                f"signatures[{i}] (keyid {want[:16]}) does not verify: the payload or the "
                "signature was altered"
            )
    if not matched and not problems:
        problems.append(
            f"no signature by this key (keyid {want[:16]}); the envelope is signed by keyid "
            f"{', '.join(k[:16] for k in seen) or 'none'}: wrong key"
        )
    if problems or not matched or payload is None:
        raise GateFailed(
            f"{where}: signature check failed:\n  " + "\n  ".join(problems),
            hint="verify with the public key that matches the signing key, or rebuild",
        )
    try:
        statement = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise GateFailed(f"{where}: signed payload is not JSON ({exc})")
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise GateFailed(f"{where}: signed payload is not an in-toto Statement v1")
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise GateFailed(f"{where}: predicateType is not {PREDICATE_TYPE}")
    return statement


# ---------------------------------------------------------------------------
# Statement


def builder_id() -> str:
    """Who ran the build: $VPR_BUILDER_ID, the GitHub workflow, or a local builder."""
    given = os.environ.get("VPR_BUILDER_ID")
    if given:
        return given
    if os.environ.get("GITHUB_ACTIONS") == "true" and os.environ.get("GITHUB_WORKFLOW_REF"):
        server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
        return f"{server}/{os.environ['GITHUB_WORKFLOW_REF']}"
    return LOCAL_BUILDER


def _invocation_id() -> str | None:
    if os.environ.get("GITHUB_ACTIONS") == "true" and os.environ.get("GITHUB_RUN_ID"):
        server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
        repo = os.environ.get("GITHUB_REPOSITORY", "")
        attempt = os.environ.get("GITHUB_RUN_ATTEMPT", "1")
        return f"{server}/{repo}/actions/runs/{os.environ['GITHUB_RUN_ID']}/attempts/{attempt}"
    return None


def _sha_digest(value: str | None) -> dict[str, str] | None:
    if not value:
        return None
    value = value.split(":", 1)[1] if value.startswith("sha256:") else value
    return {"sha256": value}


def resolved_dependencies(manifest: dict[str, Any]) -> list[dict[str, Any]]:
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
    lock = core["build_env"]
    if lock.get("lock_sha256"):
        deps.append(
            {
                "name": lock.get("lock_file") or "build-lock",
                "digest": {"sha256": lock["lock_sha256"]},
                "annotations": {"role": "build environment lock"},
            }
        )
    env = manifest["environment"]
    if env.get("lock_sha256"):
        deps.append(
            {
                "name": env.get("lock_file") or "env-lock",
                "digest": {"sha256": env["lock_sha256"]},
                "annotations": {"role": "runtime environment lock"},
            }
        )
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
    if runtime.get("status") == "present" and runtime.get("commit"):
        deps.append(
            {"name": runtime.get("name") or "runtime", "digest": {"gitCommit": runtime["commit"]}}
        )
    if runtime.get("status") == "present" and runtime.get("version"):
        deps.append(
            {
                "name": runtime.get("name") or "runtime",
                "uri": f"pkg:pypi/{runtime.get('name')}@{runtime['version']}",
            }
        )
    return deps


def build_statement(
    manifest: dict[str, Any],
    manifest_sha256: str,
    external_parameters: dict[str, Any],
    *,
    manifest_name: str = "manifest.json",
) -> dict[str, Any]:
    """The in-toto Statement: subjects = both wheels + the manifest; SLSA provenance v1."""
    subjects = [
        {
            "name": manifest["core"]["wheel"]["filename"],
            "digest": {"sha256": manifest["core"]["wheel"]["sha256"]},
        },
        {
            "name": manifest["plugin"]["wheel"]["filename"],
            "digest": {"sha256": manifest["plugin"]["wheel"]["sha256"]},
        },
        {"name": manifest_name, "digest": {"sha256": manifest_sha256}},
    ]
    run_details: dict[str, Any] = {
        "builder": {
            "id": builder_id(),
            "version": {"vllm-plugin-release": manifest["pipeline"]["version"]},
        },
    }
    invocation = _invocation_id()
    if invocation:
        run_details["metadata"] = {"invocationId": invocation}
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
                "resolvedDependencies": resolved_dependencies(manifest),
            },
            "runDetails": run_details,
        },
    }


# ---------------------------------------------------------------------------
# Verification of a manifest folder


@dataclass
class Verified:
    manifest_path: Path
    statement_path: Path
    keyid: str | None
    manifest: dict[str, Any]
    statement: dict[str, Any]
    subjects: list[dict[str, Any]] = field(default_factory=list)


def locate(path: Path) -> tuple[Path, Path]:
    """(manifest.json, manifest.intoto.jsonl) for a path naming either of them or their folder."""
    from vllm_plugin_release.stages.manifest import MANIFEST_FILE, STATEMENT_FILE

    if path.is_dir():
        return path / MANIFEST_FILE, path / STATEMENT_FILE
    if path.name.endswith(".intoto.jsonl"):
        return path.with_name(path.name[: -len(".intoto.jsonl")] + ".json"), path
    return path, path.with_name(path.stem + ".intoto.jsonl")


def verify_files(path: Path, public_key: Path | None, *, manifest_only: bool = False) -> Verified:
    """Check signature (when a key is given), subject digests, and the manifest's schema.

    The manifest subject is the file given (a store copy is named <pairing_id>.json);
    the wheel subjects are looked up next to it unless `manifest_only`.

    GateFailed (exit 1) lists everything that did not match; a missing input
    named on the command line is BadInput (exit 2).
    """
    from vllm_plugin_release.stages import manifest as mf

    if not path.exists():
        raise BadInput(f"{path}: no such file", hint="pass dist/NAME/manifest.json")
    manifest_path, statement_path = locate(path)
    key = load_public_key(public_key) if public_key else None
    if not statement_path.exists():
        raise GateFailed(
            f"{statement_path}: signed statement missing next to {manifest_path.name}",
            hint="`vpr manifest build` writes it; an unsigned manifest cannot be verified",
        )
    data = statement_path.read_bytes()
    envelope = parse_envelope(data, str(statement_path))
    if key is not None:
        statement = verify_envelope(envelope, key, str(statement_path))
    else:  # digests only (publish re-checks its own output when no public key is at hand)
        problems: list[str] = []
        payload = _strict_b64(envelope.get("payload"), "payload", problems)
        if payload is None:
            raise GateFailed(f"{statement_path}: " + "; ".join(problems))
        try:
            statement = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise GateFailed(f"{statement_path}: signed payload is not JSON ({exc})")
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or not subjects:
        raise GateFailed(f"{statement_path}: the statement has no subjects")
    problems = []
    report = []
    folder = manifest_path.parent
    names: dict[str, str] = {}
    for s in subjects:
        name = s.get("name") if isinstance(s, dict) else None
        want = (s.get("digest") or {}).get("sha256") if isinstance(s, dict) else None
        if (
            not isinstance(name, str)
            or not isinstance(want, str)
            or "/" in name
            or name in ("", "..")
        ):
            problems.append(f"malformed subject {s!r}")
            continue
        names[name] = want
        file = manifest_path if name == mf.MANIFEST_FILE else folder / name
        if manifest_only and name != mf.MANIFEST_FILE:
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
    if mf.MANIFEST_FILE not in names:
        problems.append(f"{mf.MANIFEST_FILE} is not a subject of {statement_path.name}")
    manifest_ok = mf.MANIFEST_FILE in names and all(
        r["ok"] for r in report if r["name"] == mf.MANIFEST_FILE
    )
    manifest: dict[str, Any] = {}
    if manifest_ok:
        manifest = mf.read_json(manifest_path, what="manifest")
        mf.validate(manifest, str(manifest_path))  # newer schema_version: a clear BadInput
        for part in ("core", "plugin"):
            wheel = manifest[part]["wheel"]
            if names.get(wheel["filename"]) != wheel["sha256"]:
                problems.append(
                    f"{manifest_path}: {part}.wheel {wheel['filename']} sha256 {wheel['sha256']} "
                    "is not a subject of the signed statement with that digest"
                )
    if problems:
        raise GateFailed(
            f"{manifest_path}: verification failed:\n  " + "\n  ".join(problems),
            hint="something changed after signing; rebuild with `vpr manifest build`",
        )
    return Verified(
        manifest_path=manifest_path,
        statement_path=statement_path,
        keyid=keyid(key) if key is not None else None,
        manifest=manifest,
        statement=statement,
        subjects=report,
    )
