"""DSSE through securesystemslib: an envelope signed by the earlier hand-written code still
verifies and is reproduced byte for byte; the library's checks still fail every tampering.

`data/signed-by-the-hand-written-dsse.intoto.jsonl` was written by `attest.signed_bytes` as
it was before securesystemslib (key: ed25519 from the seed bytes 0..31, statement below)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from vllm_plugin_release.core import attest
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.edges.keys import load_public_key

DATA = Path(__file__).parent / "data"
OLD = DATA / "signed-by-the-hand-written-dsse.intoto.jsonl"
OLD_PUB = DATA / "signed-by-the-hand-written-dsse.pub"
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
STATEMENT: dict[str, Any] = {
    "_type": attest.STATEMENT_TYPE,
    "predicateType": attest.PREDICATE_TYPE,
    "subject": [{"name": "manifest.json", "digest": {"sha256": "0" * 64}}],
    "predicate": {
        "buildDefinition": {"buildType": attest.BUILD_TYPE},
        "runDetails": {"builder": {"id": attest.LOCAL_BUILDER}},
    },
}


def _envelope(data: bytes) -> dict[str, Any]:
    return attest.parse_envelope(data, "test")


def test_an_envelope_signed_by_the_old_code_verifies() -> None:
    public = load_public_key(OLD_PUB)
    assert attest.verify_envelope(_envelope(OLD.read_bytes()), public, "old") == STATEMENT


def test_the_library_signs_the_same_bytes_as_the_old_code() -> None:
    assert attest.signed_bytes(STATEMENT, KEY) == OLD.read_bytes()


def test_the_signature_is_plain_dsse() -> None:
    """Checked without securesystemslib: the signature is ed25519 over DSSE's PAE."""
    envelope = json.loads(attest.signed_bytes(STATEMENT, KEY))
    payload = base64.b64decode(envelope["payload"])
    pae = b"DSSEv1 %d %s %d %s" % (
        len(attest.PAYLOAD_TYPE),
        attest.PAYLOAD_TYPE.encode(),
        len(payload),
        payload,
    )
    KEY.public_key().verify(base64.b64decode(envelope["signatures"][0]["sig"]), pae)
    assert envelope["signatures"][0]["keyid"] == attest.keyid(KEY.public_key())


def _tampered(change) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    envelope = json.loads(OLD.read_bytes())
    change(envelope)
    return envelope


def _payload_changed(envelope: dict[str, Any]) -> None:
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["subject"][0]["digest"]["sha256"] = "1" * 64
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()


def _signature_flipped(envelope: dict[str, Any]) -> None:
    raw = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    raw[5] ^= 1
    envelope["signatures"][0]["sig"] = base64.b64encode(bytes(raw)).decode()


def _duplicated(envelope: dict[str, Any]) -> None:
    envelope["signatures"].append(dict(envelope["signatures"][0]))


def _extra_field(envelope: dict[str, Any]) -> None:
    envelope["signatures"][0]["cert"] = "x"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_payload_changed, "altered"),
        (_signature_flipped, "altered"),
        (_duplicated, "two signatures under one keyid"),
        (_extra_field, "malformed"),
        (lambda e: e.update(payloadType="text/plain"), "payloadType"),
        (lambda e: e.update(signatures=[]), "no signatures"),
    ],
)
def test_every_tampering_fails(change, message: str) -> None:  # type: ignore[no-untyped-def]
    public = load_public_key(OLD_PUB)
    with pytest.raises(GateFailed, match=message):
        attest.verify_envelope(_tampered(change), public, "tampered")


def test_another_key_is_the_wrong_key() -> None:
    other = Ed25519PrivateKey.from_private_bytes(bytes(32)).public_key()
    with pytest.raises(GateFailed, match="wrong key"):
        attest.verify_envelope(_envelope(OLD.read_bytes()), other, "old")


@pytest.mark.parametrize(
    ("payload_type", "payload"),
    [
        (attest.PAYLOAD_TYPE, b'{"a":1}'),
        ("application/vnd.vllm-plugin-release.store-head+json", b""),
        ("t\u00e9l\u00e9", "caf\u00e9 \u2603\n".encode()),  # more bytes than letters
        ("x", bytes(range(256)) * 3),
    ],
)
def test_pae_is_the_librarys(payload_type: str, payload: bytes) -> None:
    """`attest.pae` is written out (no securesystemslib import on a store read): it must
    stay byte for byte the library's encoding."""
    from securesystemslib.dsse import Envelope

    assert attest.pae(payload_type, payload) == Envelope(payload, payload_type, {}).pae()


def test_keyid_and_public_key_read_as_the_pem_parser_does(tmp_path: Path) -> None:
    """A key file `vpr keygen` writes is read without cryptography's PEM parser, to
    the same key; any other form still goes through it (and is refused as before)."""
    from cryptography.hazmat.primitives import serialization

    from vllm_plugin_release.core.errors import BadInput
    from vllm_plugin_release.edges import keys

    _, public = keys.generate_keypair(tmp_path / "k")
    fast = load_public_key(public)
    slow = serialization.load_pem_public_key(public.read_bytes())
    raw = serialization.Encoding.Raw, serialization.PublicFormat.Raw
    assert fast.public_bytes(*raw) == slow.public_bytes(*raw)  # type: ignore[union-attr]
    assert attest.keyid(fast) == attest.keyid(slow)  # type: ignore[arg-type]
    assert keys._ed25519_pem(public.read_bytes()) is not None  # the fast path was taken
    rsa_like = public.read_bytes().replace(b"MCowBQYDK2VwAyEA", b"MCowBQYDK2VxAyEA")  # ed448 oid
    (tmp_path / "other.pub").write_bytes(rsa_like)
    assert keys._ed25519_pem(rsa_like) is None
    with pytest.raises(BadInput):
        load_public_key(tmp_path / "other.pub")
