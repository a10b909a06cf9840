"""Small signed documents of the store (a ledger line, the head, a pointer, the schedule): one
DSSE envelope per canonical JSON line, verified strictly before the document's own parser."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.attest import keyid, pae
from vllm_plugin_release.core.cache import canonical_json
from vllm_plugin_release.core.errors import GateFailed

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )


def payload_of(document: Mapping[str, Any]) -> bytes:
    return canonical_json(document).encode()


def sign(payload: bytes, payload_type: str, key: Ed25519PrivateKey) -> bytes:
    """`payload` in a DSSE envelope signed with `key`: one canonical JSON line."""
    envelope = {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": payload_type,
        "signatures": [
            {
                "keyid": keyid(key.public_key()),
                "sig": base64.b64encode(key.sign(pae(payload_type, payload))).decode(),
            }
        ],
    }
    return (canonical_json(envelope) + "\n").encode()


def _envelope(
    line: bytes, payload_type: str, where: str, what: str, hint: str, canonical: bool = True
) -> Any:
    """(payload bytes, signatures) of a well-formed envelope of `payload_type`, canonical
    unless the caller holds bytes vouched for as a whole (`canonical=False`)."""
    try:
        envelope = bounded.loads(line)
        payload = base64.b64decode(envelope["payload"], validate=True)
        sigs, kind = envelope["signatures"], envelope["payloadType"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise GateFailed(f"{where}: not a signed {what}", hint=hint)
    if kind != payload_type or not isinstance(sigs, list):
        raise GateFailed(f"{where}: not a signed {what}", hint=hint)
    if canonical and (canonical_json(envelope) + "\n").encode() != line:
        raise GateFailed(f"{where}: not in its signed canonical form (altered)", hint=hint)
    return payload, sigs


def verify(
    line: bytes,
    payload_type: str,
    public_key: Ed25519PublicKey,
    where: str,
    *,
    what: str,
    hint: str,
) -> bytes:
    """The payload of a signed line, its signature by `public_key` checked; GateFailed naming
    `where` (and both keyids when another key signed it) otherwise."""
    from cryptography.exceptions import InvalidSignature

    payload, sigs = _envelope(line, payload_type, where, what, hint)
    want = keyid(public_key)
    for sig in sigs:
        if not isinstance(sig, dict) or sig.get("keyid") != want:
            continue
        try:
            public_key.verify(base64.b64decode(sig["sig"]), pae(payload_type, payload))
        except (InvalidSignature, ValueError, TypeError, KeyError, binascii.Error):
            break
        return bytes(payload)
    signers = sorted({str(s.get("keyid"))[:16] for s in sigs if isinstance(s, dict)} - {want[:16]})
    if signers and not any(isinstance(s, dict) and s.get("keyid") == want for s in sigs):
        raise GateFailed(
            f"{where}: the signature does not verify with keyid {want[:16]} (this key): the "
            f"{what} is signed by keyid {', '.join(signers)}, another key",
            hint="use the key this store is signed with (--key to read it, --signing-key to "
            "write it), or give this key a store of its own",
        )
    raise GateFailed(
        f"{where}: the signature does not verify with keyid {want[:16]} (the {what} was altered)",
        hint=hint,
    )


def unverified(line: bytes, payload_type: str, where: str, *, what: str, hint: str) -> bytes:
    """The payload of a well-formed line of `payload_type`, its signature NOT checked:
    only for bytes something signed vouches for as a whole (the ledger the store's signed
    head names by sha256). GateFailed for a malformed line."""
    payload, _ = _envelope(line, payload_type, where, what, hint, canonical=False)
    return bytes(payload)


def check(
    line: bytes,
    payload_type: str,
    public_key: Ed25519PublicKey,
    where: str,
    *,
    what: str,
    hint: str,
) -> None:
    """`verify`, and its payload a JSON object (`body`): GateFailed otherwise."""
    body(verify(line, payload_type, public_key, where, what=what, hint=hint), where, hint)


def body(payload: bytes, where: str, hint: str) -> dict[str, Any]:
    """A verified (or vouched for) payload as a JSON object (bounded); GateFailed otherwise."""
    try:
        document = bounded.loads(payload)
    except json.JSONDecodeError:
        document = None
    if not isinstance(document, dict):
        raise GateFailed(f"{where}: the signed payload is not a JSON object", hint=hint)
    return document
