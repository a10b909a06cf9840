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
