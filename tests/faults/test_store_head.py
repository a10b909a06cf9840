"""A store's files can be cut, frozen, rolled back, mixed or re-signed by another key: the
signed store head (`head.json`: the version, an expiry, the sha256 and size of index.json
and of the ledger, the ledger's entry count and last entry) lets `vpr manifest query`,
`matrix` and `ledger` refuse each (exit 1 naming what was found), as TUF's timestamp and
snapshot roles do. Each case starts from a store its writers signed, which reads fine."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import built_manifest, manifest_variant, sign_store, typed, vpr, write_manifest
from vllm_plugin_release.core import ledger
from vllm_plugin_release.core import signed as signed_line
from vllm_plugin_release.core import storehead as sh
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.edges import keys, trust
from vllm_plugin_release.edges.store import DirStore
from vllm_plugin_release.edges.trust import Trusted


def _entry(manifest: dict[str, Any], verdict: str) -> ledger.Draft:
    entry = ledger.entry_from_manifest(
        typed(manifest), manifest_sha256="ab" * 32, runner="cpu", time="2026-12-01T00:00:00Z"
    )
    entry = dataclasses.replace(entry, verdict=verdict)
    return entry


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return built_manifest(tmp_path_factory.mktemp("dist") / "ref")


@pytest.fixture
def signed(tmp_path: Path, base: dict, monkeypatch: pytest.MonkeyPatch):
    """A store with one pairing (pilot) and three ledger entries; the key where the CLI
    looks by default (VPR_CACHE_DIR=tmp_path/.vpr). `snapshots[n]`: the store after n
    ledger entries."""
    private, _ = keys.generate_keypair(tmp_path / ".vpr" / keys.DEFAULT_KEY)
    key = keys.load_private_key(private)
    root = tmp_path / "store"
    store = DirStore(root)
    m = manifest_variant(base, commit="1" * 40)
    store.add(write_manifest(tmp_path / "in", m))
    snapshots = {}
    for n, verdict in enumerate(("pilot", "lab", "pilot"), start=1):
        trust.append(store, _entry(m, verdict), key)
        snapshots[n] = tmp_path / f"after-{n}"
        shutil.copytree(root, snapshots[n])
    return {"root": root, "key": key, "manifest": m, "snapshots": snapshots}


def _ledger(tmp_path: Path, store: Path, *more: str) -> subprocess.CompletedProcess:
    return vpr("manifest", "ledger", "--store", str(store), "--json", *more, cwd=tmp_path)


def _query(tmp_path: Path, store: Path) -> subprocess.CompletedProcess:
    return vpr("manifest", "query", "--store", str(store), "--json", cwd=tmp_path)


def _refused(done: subprocess.CompletedProcess, *needles: str) -> str:
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "Traceback" not in said
    for needle in needles:
        assert needle in said, said
    return said


def test_the_signed_store_reads(signed, tmp_path: Path) -> None:
    done = _ledger(tmp_path, signed["root"])
    assert done.returncode == 0, done.stderr
    assert [e["verdict"] for e in json.loads(done.stdout)] == ["pilot", "lab", "pilot"]
    assert _query(tmp_path, signed["root"]).returncode == 0
    # written on purpose: store files never writable by others, the consumer's record private
    for name in ("head.json", "index.json", ledger.LEDGER_FILE):
        assert (signed["root"] / name).stat().st_mode & 0o022 == 0, name
    records = list((tmp_path / ".vpr" / "trust").iterdir())
    assert records and all(p.stat().st_mode & 0o777 == 0o600 for p in records)
    assert (tmp_path / ".vpr" / "trust").stat().st_mode & 0o077 == 0


def test_a_ledger_cut_short_is_refused(signed, tmp_path: Path) -> None:
    path = signed["root"] / ledger.LEDGER_FILE
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]))  # the newest verdict removed
    _refused(_ledger(tmp_path, signed["root"]), "ledger.jsonl", "head")


def _promote(path: Path) -> None:
    index = json.loads(path.read_text())
    for entry in index["pairings"].values():
        entry["verdict"] = "fleet"  # promoted by hand
    path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def test_an_edited_index_is_refused(signed, tmp_path: Path) -> None:
    """Query reads the signed summary, never the edit; what reads index.json refuses it."""
    _promote(signed["root"] / "index.json")
    done = _query(tmp_path, signed["root"])
    assert done.returncode == 0 and '"fleet"' not in done.stdout + done.stderr, done.stderr
    reader = Trusted(DirStore(signed["root"]), signed["key"].public_key(), memory=None)
    with pytest.raises(GateFailed, match=r"index\.json"):
        reader.index()


def test_an_edited_index_of_a_store_without_a_summary_is_refused(signed, tmp_path) -> None:
    """A store published before summaries: query reads index.json, and refuses the edit."""
    (signed["root"] / "summary.json").unlink()
    shutil.rmtree(signed["root"] / "summary")
    sign_store(signed["root"], signed["key"], check=False)  # a head of before: no summary
    _promote(signed["root"] / "index.json")
    said = _refused(_query(tmp_path, signed["root"]), "index.json")
    assert '"fleet"' not in said and said.count("has no summary") == 1  # the note once


def test_a_store_rolled_back_to_an_older_signed_state_is_refused(signed, tmp_path) -> None:
    assert _ledger(tmp_path, signed["root"]).returncode == 0  # this consumer saw 3 entries
    shutil.rmtree(signed["root"])
    shutil.copytree(signed["snapshots"][2], signed["root"])  # everything as it was at 2
    _refused(_ledger(tmp_path, signed["root"]), "older")


def test_two_heads_signed_under_one_version_are_refused(signed, tmp_path: Path) -> None:
    """Equivocation: the key's holder signs a second head under a version this consumer
    has seen (a valid signature, valid files, not older); the consumer refuses it, and
    reads the head it saw as often as it likes."""
    for _ in range(2):
        assert _ledger(tmp_path, signed["root"]).returncode == 0  # seen: this version
    path = signed["root"] / sh.HEAD_FILE
    key = signed["key"]
    payload = signed_line.verify(
        path.read_bytes(), sh.PAYLOAD_TYPE, key.public_key(), str(path), what="head", hint=""
    )
    body = json.loads(payload)
    moment = sh.utc(body["time"]) - dt.timedelta(seconds=1)
    body["time"] = sh.stamp(moment)  # another state of one version: its time alone differs
    path.write_bytes(signed_line.sign(signed_line.payload_of(body), sh.PAYLOAD_TYPE, key))
    _refused(_ledger(tmp_path, signed["root"]), "two states were signed under one version")
    _refused(_query(tmp_path, signed["root"]), "two states were signed under one version")
    fresh = tmp_path / "another-consumer"  # never saw the first head: it reads this one
    fresh.mkdir()
    pub = keys.public_path(tmp_path / ".vpr" / keys.DEFAULT_KEY)
    done = _ledger(fresh, signed["root"], "--key", str(pub))
    assert done.returncode == 0, done.stderr


def test_an_index_and_ledger_from_two_states_are_refused(signed, tmp_path: Path) -> None:
    """Mix-and-match: today's head and index, the ledger of an older state."""
    old = signed["snapshots"][1] / ledger.LEDGER_FILE
    shutil.copyfile(old, signed["root"] / ledger.LEDGER_FILE)
    _refused(_ledger(tmp_path, signed["root"]), "ledger.jsonl")


def test_a_frozen_store_is_refused_once_its_head_expires(
    signed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's head is valid for VPR_STORE_HEAD_DAYS; a store nobody refreshes (or an
    attacker serving one old state forever) expires."""
    monkeypatch.setenv("VPR_STORE_HEAD_DAYS", "0.00001")  # under a second
    trust.append(DirStore(signed["root"]), _entry(signed["manifest"], "lab"), signed["key"])
    time.sleep(2)
    _refused(_ledger(tmp_path, signed["root"]), "expired")
    _refused(_query(tmp_path, signed["root"]), "expired")


def test_a_store_signed_by_another_key_is_refused(signed, tmp_path: Path) -> None:
    _, other_pub = keys.generate_keypair(tmp_path / "other" / "o.key")
    done = _ledger(tmp_path, signed["root"], "--key", str(other_pub))
    _refused(done, "another key")
    q = vpr("manifest", "query", "--store", str(signed["root"]), "--key", str(other_pub),
            cwd=tmp_path)  # fmt: skip
    _refused(q, "another key")


def test_a_store_without_a_signed_head_is_refused(signed, tmp_path: Path) -> None:
    (signed["root"] / "head.json").unlink()
    _refused(_query(tmp_path, signed["root"]), "head.json")
    _refused(_ledger(tmp_path, signed["root"]), "head.json")


def test_sign_store_vouches_for_a_reviewed_store_and_never_for_a_bad_ledger(
    tmp_path: Path, base: dict
) -> None:
    """A store written before heads (no signer): refused until its publisher runs
    `vpr manifest sign-store`; a ledger line that does not verify is never signed over."""
    key = keys.load_private_key(keys.generate_keypair(tmp_path / ".vpr" / keys.DEFAULT_KEY)[0])
    root = tmp_path / "store"
    store = DirStore(root)  # no signer: as a writer before this version
    store.add(write_manifest(tmp_path / "in", manifest_variant(base, commit="2" * 40)))
    said = _refused(_query(tmp_path, root), "no signed head", "sign-store")
    assert "Traceback" not in said
    done = vpr("manifest", "sign-store", "--store", str(root), cwd=tmp_path)
    assert done.returncode == 0 and "signed head version" in done.stdout, done.stderr
    assert _query(tmp_path, root).returncode == 0
    trust.append(DirStore(root), _entry(manifest_variant(base, commit="2" * 40), "pilot"),
                       key)  # fmt: skip
    path = root / ledger.LEDGER_FILE
    path.write_bytes(path.read_bytes().replace(b'"payload":"', b'"payload":"e', 1))
    bad = vpr("manifest", "sign-store", "--store", str(root), cwd=tmp_path)
    assert bad.returncode == 1 and "ledger.jsonl:1" in bad.stderr, bad.stderr


def _head_version(root: Path, key: Any) -> int:
    from vllm_plugin_release.edges.store import read_head

    head = read_head(root, key.public_key(), "head")
    assert head is not None
    return head.version


DEEP_INDEX = "[" * 100_000 + "]" * 100_000  # JSON nested 100,000 levels deep


@pytest.mark.parametrize("replaced", ["deep", "promoted", "removed"])
def test_a_publisher_that_finds_the_index_replaced_says_so_and_the_ledger_records_it(
    signed, tmp_path: Path, base: dict, capfd: pytest.CaptureFixture[str], replaced: str
) -> None:
    """index.json replaced behind the writers' backs: the next publish still rebuilds it
    from the manifests, but says which file, what it found, what it restored and from
    which head version, and appends a signed `repair` entry to the ledger."""
    root, key = signed["root"], signed["key"]
    version = _head_version(root, key)
    index = root / "index.json"
    if replaced == "deep":
        index.write_text(DEEP_INDEX)
    elif replaced == "promoted":
        _promote(index)
    else:
        index.unlink()
    capfd.readouterr()
    other = manifest_variant(base, commit="2" * 40)
    DirStore(root, signer=key).add(write_manifest(tmp_path / "in", other, "other.json"))
    said = capfd.readouterr().err
    assert f"store {root}: index.json: not the file the store's signed head (version " in said
    assert f"(version {version})" in said and "restored: rebuilt from the 2 manifest(s)" in said
    done = _ledger(tmp_path, root)
    assert done.returncode == 0, done.stderr
    last = json.loads(done.stdout)[-1]
    assert last["kind"] == "repair" and last["verdict"] is None
    assert last["repair"]["file"] == "index.json"
    assert last["repair"]["head_version"] == version
    if replaced == "removed":
        assert last["repair"]["found"] == "missing"
    assert "rebuilt from the 2 manifest(s)" in last["repair"]["restored"]
    shown = _ledger(tmp_path, root, "--kind", "repair")
    assert shown.returncode == 0 and len(json.loads(shown.stdout)) == 1
    query = _query(tmp_path, root)
    assert query.returncode == 0 and '"fleet"' not in query.stdout  # the signed state
    assert len(json.loads(query.stdout)) == 2


def test_a_publisher_that_finds_the_store_as_signed_repairs_nothing(
    signed, tmp_path: Path, base: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    root, key = signed["root"], signed["key"]
    other = manifest_variant(base, commit="2" * 40)
    DirStore(root, signer=key).add(write_manifest(tmp_path / "in", other, "other.json"))
    assert "not the file the store's signed head" not in capfd.readouterr().err
    kinds = [e["kind"] for e in json.loads(_ledger(tmp_path, root).stdout)]
    assert kinds == ["release", "release", "release"]


def test_a_ledger_summary_or_pointer_replaced_is_said_and_recorded(
    signed, tmp_path: Path, base: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    from vllm_plugin_release.core.schedule import Pointer

    root, key = signed["root"], signed["key"]
    (root / "ledger" / "summary.json").write_text('{"entries": 0}\n')
    trust.append(DirStore(root), _entry(signed["manifest"], "pilot"), key)
    said = capfd.readouterr().err
    assert "ledger/summary.json: not the file the store's signed head" in said
    assert "restored: made again from the ledger" in said
    kinds = [e["kind"] for e in json.loads(_ledger(tmp_path, root).stdout)]
    assert kinds == ["release", "release", "release", "release", "repair"]
    pointer = Pointer("ref", "https://example.org/vllm.git", "a" * 40, None, "2026-12-01T00:00:00Z")
    trust.write_lkg(DirStore(root), "ref", pointer, key)
    (root / "lkg" / "ref.json").write_text("{}\n")  # replaced behind the writers' backs
    trust.write_lkg(DirStore(root), "ref", pointer, key)
    assert "lkg/ref.json: not the file the store's signed head" in capfd.readouterr().err
    last = json.loads(_ledger(tmp_path, root).stdout)[-1]
    assert last["kind"] == "repair" and last["repair"]["file"] == "lkg/ref.json"


def test_vpr_publish_into_a_store_whose_index_was_replaced_says_so(tmp_path: Path) -> None:
    """The real `vpr publish` of a published pairing again, into its store whose index.json
    was replaced by a document 100,000 levels deep: exit 0 (the index is rebuilt from the
    signed manifests), and the repair is said and signed into the ledger."""
    from tests.pairing import published_pairing

    p = published_pairing(tmp_path)
    store, root = p["store"], p["root"]
    (store / "index.json").write_text(DEEP_INDEX)
    spec = root / "buildspec" / "ref.toml"
    done = vpr("publish", "--spec", str(spec), "--store", str(store), cwd=root, env=p["env"])
    assert done.returncode == 0, done.stderr
    assert "index.json: not the file the store's signed head (version" in done.stderr
    assert "restored: rebuilt from the 1 manifest(s) in pairings/" in done.stderr
    entries = vpr("manifest", "ledger", "--store", str(store), "--json", cwd=root)
    assert entries.returncode == 0, entries.stderr
    repairs = [e for e in json.loads(entries.stdout) if e["kind"] == "repair"]
    assert [r["repair"]["file"] for r in repairs] == ["index.json"]
    assert vpr("manifest", "query", "--store", str(store), cwd=root).returncode == 0
