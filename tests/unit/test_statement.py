"""The signed statement read typed (`attest.read_signed`, `attest.Statement`): its subjects
read once, with or without the signature checked, and a payload that is no JSON object
refused with a message rather than a crash."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.pairing import make_pairing
from vllm_plugin_release.core import attest
from vllm_plugin_release.core.cache import canonical_json
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.edges import keys
from vllm_plugin_release.stages import manifest as mf
from vllm_plugin_release.stages.verify import verify_files


def _signed(tmp_path: Path) -> tuple[Path, Path]:
    key, pub = keys.generate_keypair(tmp_path / "keys" / "k.key")
    dist = tmp_path / "dist" / "ref"
    pins = make_pairing(dist)
    mf.write_signed(dist, mf.build_manifest(pins, mf.read_records(dist)), pins, key)
    return dist, pub


def test_read_signed_gives_the_subjects_with_and_without_the_key(tmp_path: Path) -> None:
    dist, pub = _signed(tmp_path)
    data = (dist / "manifest.intoto.jsonl").read_bytes()
    checked = attest.read_signed(data, keys.load_public_key(pub), "s")
    unchecked = attest.read_signed(data, None, "s")
    assert checked == unchecked and checked.listed and not checked.malformed
    names, problems = attest.subject_digests(checked)
    assert problems == [] and list(names) == [s.name for s in checked.subjects]
    assert (
        names["manifest.json"]
        == attest.hashlib.sha256((dist / "manifest.json").read_bytes()).hexdigest()
    )
    # the raw statement is what is signed: signing it again gives the same bytes
    key = keys.load_private_key(tmp_path / "keys" / "k.key")
    assert attest.signed_bytes(checked.raw, key) == data


def test_malformed_subjects_are_named_and_none_is_said() -> None:
    statement = attest.parse_statement(
        {"subject": [{"name": "../x", "digest": {"sha256": "a"}}, {"name": "m.json"}]}, "s"
    )
    assert statement.subjects == () and len(statement.malformed) == 2 and statement.listed
    assert attest.subject_digests(statement)[1][0].startswith("malformed subject")
    empty = attest.parse_statement({"subject": []}, "s")
    assert not empty.listed
    assert attest.subject_digests(empty) == ({}, ["the statement has no subjects"])


@pytest.mark.parametrize("payload", [b"[]", b'"text"', b"7"])
def test_an_unsigned_check_of_a_payload_that_is_no_object_is_refused(
    tmp_path: Path, payload: bytes
) -> None:
    """Digests only (no key): a canonical envelope whose payload is JSON but no object
    was an AttributeError (`'list' object has no attribute 'get'`), now a GateFailed."""
    dist, _ = _signed(tmp_path)
    envelope = json.loads((dist / "manifest.intoto.jsonl").read_bytes())
    envelope["payload"] = base64.b64encode(payload).decode()
    (dist / "manifest.intoto.jsonl").write_text(canonical_json(envelope) + "\n")
    with pytest.raises(GateFailed, match="not a JSON object"):
        verify_files(dist / "manifest.json", None)
