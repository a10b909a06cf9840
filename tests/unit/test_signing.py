"""Provenance and signature: real ed25519 keys, DSSE, in-toto/SLSA, tamper detection."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import SDIST_SHA, flip_byte, make_pairing, vpr
from vllm_plugin_release.core import attest
from vllm_plugin_release.core import manifestdoc as doc
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.edges import keys
from vllm_plugin_release.stages import manifest as mf
from vllm_plugin_release.stages.verify import verify_files


def _signed(tmp_path: Path, **kw: Any) -> tuple[Path, Path, dict[str, Any]]:
    """dist folder with a signed manifest; returns (dist, public key, pins)."""
    key, pub = keys.generate_keypair(tmp_path / "keys" / "k.key")
    dist = tmp_path / "dist" / "ref"
    pins = make_pairing(dist, **kw)
    m = mf.build_manifest(pins, mf.read_records(dist))
    mf.write_signed(dist, m, pins, key)
    return dist, pub, pins.to_json()


def test_pae_matches_the_dsse_spec() -> None:
    got = attest.pae("http://example.com/HelloWorld", b"hello world")
    assert got == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


def test_generate_keypair(tmp_path: Path) -> None:
    key, pub = keys.generate_keypair(tmp_path / "k.key")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in key.read_bytes() and b"PUBLIC KEY" in pub.read_bytes()
    assert attest.keyid(keys.load_private_key(key).public_key()) == attest.keyid(
        keys.load_public_key(pub)
    )
    with pytest.raises(BadInput, match="already exists"):
        keys.generate_keypair(tmp_path / "k.key")
    keys.generate_keypair(tmp_path / "k.key", force=True)


def test_encrypted_key_needs_its_passphrase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(keys.PASSWORD_ENV, "correct horse")
    key, _ = keys.generate_keypair(tmp_path / "k.key", encrypt=True)
    keys.load_private_key(key)
    monkeypatch.delenv(keys.PASSWORD_ENV)
    with pytest.raises(BadInput, match="encrypted"):
        keys.load_private_key(key)
    monkeypatch.setenv(keys.PASSWORD_ENV, "wrong")
    with pytest.raises(BadInput) as exc:
        keys.load_private_key(key)
    assert key.read_text().splitlines()[1] not in str(exc.value)


def test_statement_and_provenance(tmp_path: Path) -> None:
    dist, pub, pins = _signed(tmp_path, docker=True)
    v = verify_files(dist / "manifest.json", pub)
    assert v.statement.type == "https://in-toto.io/Statement/v1"
    assert v.statement.predicate_type == "https://slsa.dev/provenance/v1"
    assert [s.name for s in v.statement.subjects][-1] == "manifest.json"
    st = v.statement.raw  # the statement as signed: the provenance in it
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    assert st["predicateType"] == "https://slsa.dev/provenance/v1"
    names = [s["name"] for s in st["subject"]]
    assert names == [
        "vllm-0.26.0+empty-py3-none-any.whl",
        "vpr_test_plugin-0.1.0-py3-none-any.whl",
        "manifest.json",
    ]
    bd = st["predicate"]["buildDefinition"]
    assert bd["buildType"] == attest.BUILD_TYPE
    assert bd["externalParameters"] == pins
    digests = [d["digest"] for d in bd["resolvedDependencies"]]
    assert {"sha256": SDIST_SHA} in digests
    assert {"gitCommit": pins["plugin"]["source"]["commit"]} in digests
    assert {"sha256": "1" * 64} in digests  # build lock
    env_lock = json.loads((dist / "env.json").read_text())["lock_sha256"]
    assert {"sha256": env_lock} in digests  # environment lock
    assert {"sha256": "d" * 64} in digests  # base image
    assert st["predicate"]["runDetails"]["builder"]["id"]
    envelope = json.loads((dist / "manifest.intoto.jsonl").read_text())
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert json.loads(base64.b64decode(envelope["payload"])) == st


def test_any_tampered_byte_fails(tmp_path: Path) -> None:
    dist, pub, _ = _signed(tmp_path)
    verify_files(dist / "manifest.json", pub)
    envelope = dist / "manifest.intoto.jsonl"
    size = envelope.stat().st_size
    for offset in range(size):  # every byte of the signed envelope
        original = flip_byte(envelope, offset)
        with pytest.raises(GateFailed):
            verify_files(dist / "manifest.json", pub)
        envelope.write_bytes(original)
    targets = [dist / "manifest.json", *sorted(dist.glob("*.whl"))]
    for target in targets:
        size = target.stat().st_size
        for offset in sorted({0, 1, size // 3, size // 2, size - 2, size - 1}):
            original = flip_byte(target, offset)
            with pytest.raises(GateFailed, match=target.name.replace("+", r"\+")):
                verify_files(dist / "manifest.json", pub)
            target.write_bytes(original)
    verify_files(dist / "manifest.json", pub)


def test_wrong_key_missing_subject_and_newer_schema(tmp_path: Path) -> None:
    dist, pub, pins = _signed(tmp_path)
    _, other = keys.generate_keypair(tmp_path / "other.key")
    with pytest.raises(GateFailed, match="wrong key"):
        verify_files(dist / "manifest.json", other)
    wheel = next(dist.glob("vpr_test_plugin-*.whl"))
    wheel.rename(tmp_path / wheel.name)
    with pytest.raises(GateFailed, match="subject file missing"):
        verify_files(dist / "manifest.intoto.jsonl", pub)
    (tmp_path / wheel.name).rename(wheel)
    with pytest.raises(BadInput, match="private key"):
        verify_files(dist, tmp_path / "keys" / "k.key")

    # A correctly signed manifest from a newer schema: a clear message, exit 2, no crash.
    m = json.loads((dist / "manifest.json").read_text())
    m["schema_version"] = doc.SCHEMA_VERSION + 1
    m["future_field"] = True
    data = doc.manifest_bytes(m)
    (dist / "manifest.json").write_bytes(data)
    import hashlib

    statement = attest.build_statement(
        m, hashlib.sha256(data).hexdigest(), pins, builder_id=keys.builder_id()
    )
    key = keys.load_private_key(tmp_path / "keys" / "k.key")
    (dist / "manifest.intoto.jsonl").write_bytes(
        attest.envelope_bytes(attest.sign_statement(statement, key))
    )
    with pytest.raises(BadInput, match=f"schema_version {doc.SCHEMA_VERSION + 1} is newer"):
        verify_files(dist / "manifest.json", pub)


def test_store_copy_verifies_with_manifest_only(tmp_path: Path) -> None:
    dist, pub, _ = _signed(tmp_path)
    from vllm_plugin_release.edges.store import DirStore

    result = DirStore(tmp_path / "store").add(
        dist / "manifest.json", dist / "manifest.intoto.jsonl"
    )
    copy = tmp_path / "store" / result.entry.manifest
    v = verify_files(copy, pub, manifest_only=True)
    assert v.manifest.pairing_id == result.entry.pairing_id
    with pytest.raises(GateFailed, match="subject file missing"):
        verify_files(copy, pub)
    flip_byte(copy, 10)
    with pytest.raises(GateFailed, match="does not match the signed subject"):
        verify_files(copy, pub, manifest_only=True)
    done = vpr("manifest", "verify", str(copy), "--key", str(pub), "--manifest-only", cwd=tmp_path)
    assert done.returncode == 1


def test_a_pairing_read_from_a_store_is_the_manifest_its_statement_signs(tmp_path: Path) -> None:
    """`vpr install`'s check of a store's pairing (verify_pairing, in memory): the signed
    manifest verifies; another valid manifest of the same wheels (another pairing's, as a
    store could serve under this statement) is refused by the manifest subject alone."""
    from tests.pairing import manifest_variant

    dist, pub, _ = _signed(tmp_path)
    key = keys.load_public_key(pub)
    data = (dist / "manifest.json").read_bytes()
    envelope = (dist / "manifest.intoto.jsonl").read_bytes()
    where = ("store/pairings/x.json", "store/pairings/x.intoto.jsonl")
    manifest, _ = attest.verify_pairing(data, envelope, key, where)
    assert manifest.pairing_id == json.loads(data)["pairing_id"]
    other = doc.manifest_bytes(manifest_variant(json.loads(data), commit="2" * 40))
    with pytest.raises(GateFailed, match=r"is not the signed manifest\.json subject"):
        attest.verify_pairing(other, envelope, key, where)


def test_a_signed_payload_that_is_no_statement_is_refused(tmp_path: Path) -> None:
    """Signed by the right key and still refused: a payload that is not JSON, not an
    object, not an in-toto Statement v1, or of another predicate type."""
    key = keys.load_private_key(keys.generate_keypair(tmp_path / "k.key")[0])
    pub = key.public_key()

    def envelope(payload: bytes) -> dict[str, Any]:
        sig = key.sign(attest.pae(attest.PAYLOAD_TYPE, payload))
        return {
            "payload": base64.b64encode(payload).decode(),
            "payloadType": attest.PAYLOAD_TYPE,
            "signatures": [{"keyid": attest.keyid(pub), "sig": base64.b64encode(sig).decode()}],
        }

    good = {"_type": attest.STATEMENT_TYPE, "predicateType": attest.PREDICATE_TYPE}
    assert attest.verify_envelope(envelope(json.dumps(good).encode()), pub, "S") == good
    for payload, said in (
        (b"not json", "signed payload is not JSON"),
        (b"[]", "not an in-toto Statement v1"),
        (json.dumps({**good, "_type": "x"}).encode(), "not an in-toto Statement v1"),
        (json.dumps({**good, "predicateType": "x"}).encode(), "predicateType is not"),
    ):
        with pytest.raises(GateFailed, match=said):
            attest.verify_envelope(envelope(payload), pub, "S")


def test_a_store_pairing_signed_over_other_wheels_or_no_json_is_refused(tmp_path: Path) -> None:
    """verify_pairing with a statement its key did sign: one whose wheel subjects are not
    the manifest's wheels (a publisher's slip) is refused naming the wheel; a manifest that
    is its subject but no JSON is bad input, never a traceback."""
    import hashlib

    dist, pub_path, pins = _signed(tmp_path)
    key = keys.load_private_key(tmp_path / "keys" / "k.key")
    data = (dist / "manifest.json").read_bytes()
    statement = attest.build_statement(
        json.loads(data), hashlib.sha256(data).hexdigest(), pins, builder_id=keys.builder_id()
    )
    for subject in statement["subject"]:
        if subject["name"].startswith("vpr_test_plugin-"):
            subject["digest"]["sha256"] = "0" * 64
    where = ("s/m.json", "s/m.intoto.jsonl")
    public = keys.load_public_key(pub_path)
    with pytest.raises(GateFailed, match=r"plugin\.wheel vpr_test_plugin-.* is not a subject"):
        attest.verify_pairing(data, attest.signed_bytes(statement, key), public, where)
    garbage = b"not json\n"
    statement = attest.build_statement(
        json.loads(data), hashlib.sha256(garbage).hexdigest(), pins, builder_id=keys.builder_id()
    )
    with pytest.raises(BadInput, match=r"s/m\.json:1: manifest is not valid JSON"):
        attest.verify_pairing(garbage, attest.signed_bytes(statement, key), public, where)


def test_the_verification_report_says_what_was_checked(tmp_path: Path) -> None:
    """`vpr manifest verify --json`'s report: the key's keyid (none for digests only), each
    subject ok with no problem; with --manifest-only the wheels are "not checked", still
    ok. A statement without its manifest beside it is bad input, as a missing file is."""
    dist, pub, _ = _signed(tmp_path)
    v = verify_files(dist / "manifest.json", pub)
    assert v.keyid == attest.keyid(keys.load_public_key(pub))
    assert v.subjects and all(r["ok"] and "problem" not in r for r in v.subjects)
    assert verify_files(dist / "manifest.json", None).keyid is None  # digests only
    only = verify_files(dist / "manifest.json", pub, manifest_only=True).subjects
    wheels = [r for r in only if r["name"] != "manifest.json"]
    assert wheels and all(r["ok"] and r["problem"] == "not checked" for r in wheels)
    core, plugin = (next(dist.glob(f"{n}-*.whl")) for n in ("vllm", "vpr_test_plugin"))
    core.unlink()
    flip_byte(plugin, 0)
    with pytest.raises(GateFailed) as failed:  # every problem named, not the first alone
        verify_files(dist / "manifest.json", pub)
    assert "subject file missing" in failed.value.message
    assert f"{plugin.name}: sha256" in failed.value.message
    (dist / "manifest.json").unlink()
    with pytest.raises(BadInput, match=r"manifest\.json: no such file"):
        verify_files(dist / "manifest.intoto.jsonl", pub)
