"""Signing keys on disk (PKCS#8 PEM, mode 0600, `KEY.pub` beside it; named only by path,
never by its bytes) and who is signing: the environment-facing half of signing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.attest import LOCAL_BUILDER
from vllm_plugin_release.core.cache import atomic_write_bytes
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges import settings

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

KEY_ENV = "VPR_SIGNING_KEY"
PASSWORD_ENV = "VPR_SIGNING_KEY_PASSWORD"
DEFAULT_KEY = Path("keys") / "manifest-signing.key"  # under the .vpr/ cache folder


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
        password = settings.text(PASSWORD_ENV)
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
        data = bounded.read_file(path, bounded.MAX_KEY, "signing key")
    except FileNotFoundError:
        raise BadInput(
            f"{path}: signing key not found",
            hint="create one with `vpr keygen --out PATH`, then point --signing-key, "
            f"${KEY_ENV} or [publish] signing_key at it",
        )
    password = settings.text(PASSWORD_ENV)
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
            hint="`vpr keygen` writes a PKCS#8 ed25519 key",
        )
    if not isinstance(key, Ed25519PrivateKey):
        raise BadInput(f"{path}: signing key is not an ed25519 key")
    return key


# An ed25519 SubjectPublicKeyInfo is these 12 DER bytes, then the raw 32-byte key.
_ED25519_SPKI = bytes.fromhex("302a300506032b6570032100")
_PEM_PUBLIC = (b"-----BEGIN PUBLIC KEY-----", b"-----END PUBLIC KEY-----")


def _ed25519_pem(data: bytes) -> bytes | None:
    """The raw key of a PEM ed25519 public key in the form `vpr keygen` writes (None otherwise), so
    a store reader need not import cryptography's serialization."""
    import base64
    import binascii

    lines = data.strip().splitlines()
    if len(lines) < 3 or (lines[0].strip(), lines[-1].strip()) != _PEM_PUBLIC:
        return None
    try:
        der = base64.b64decode(b"".join(x.strip() for x in lines[1:-1]), validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(der) != 44 or not der.startswith(_ED25519_SPKI):
        return None
    return der[12:]


def load_public_key(path: Path) -> Ed25519PublicKey:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        data = bounded.read_file(path, bounded.MAX_KEY, "public key")
    except FileNotFoundError:
        raise BadInput(f"{path}: public key not found", hint="pass the KEY.pub file")
    if b"PRIVATE KEY" in data:
        raise BadInput(
            f"{path}: this is a private key; verification takes the public key",
            hint=f"pass {public_path(path).name} (written next to it by `vpr keygen`)",
        )
    raw = _ed25519_pem(data)
    if raw is not None:
        return Ed25519PublicKey.from_public_bytes(raw)
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        raise BadInput(f"{path}: not a PEM public key", hint="pass the KEY.pub file")
    if not isinstance(key, Ed25519PublicKey):
        raise BadInput(f"{path}: public key is not an ed25519 key")
    return key


def resolve_key_path(
    cli: str | Path | None, spec_value: str | None, *, root: Path, cache_root: Path
) -> tuple[Path, str]:
    """Which signing key to use and why: --signing-key, $VPR_SIGNING_KEY, spec (relative to the
    project root), or `.vpr/keys/manifest-signing.key`."""
    if cli:
        return Path(cli), "--signing-key"
    env = settings.text(KEY_ENV)
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


def builder_id() -> str:
    """Who ran the build: $VPR_BUILDER_ID, the GitHub workflow, or a local builder."""
    given = settings.text("VPR_BUILDER_ID")
    if given:
        return given
    if os.environ.get("GITHUB_ACTIONS") == "true" and os.environ.get("GITHUB_WORKFLOW_REF"):
        server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
        return f"{server}/{os.environ['GITHUB_WORKFLOW_REF']}"
    return LOCAL_BUILDER


def invocation_id() -> str | None:
    """The CI run that did the build (GitHub Actions), or None."""
    if os.environ.get("GITHUB_ACTIONS") == "true" and os.environ.get("GITHUB_RUN_ID"):
        server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
        repo = os.environ.get("GITHUB_REPOSITORY", "")
        attempt = os.environ.get("GITHUB_RUN_ATTEMPT", "1")
        return f"{server}/{repo}/actions/runs/{os.environ['GITHUB_RUN_ID']}/attempts/{attempt}"
    return None
