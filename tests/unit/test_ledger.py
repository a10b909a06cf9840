"""The signed pairing ledger and the last-known-good pointer in a store folder: append,
read back verified, filters, the matrix generated from it, and every way a tampered file
is refused (exit 1 from `vpr manifest ledger`, naming the line)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.pairing import ledger_manifest
from tests.support import vpr
from vllm_plugin_release.core import attest, ledger, schedule
from vllm_plugin_release.core import signed as signing
from vllm_plugin_release.core.cache import canonical_json
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.core.manifestmodel import Manifest
from vllm_plugin_release.edges import keys, trust
from vllm_plugin_release.edges.store import DirStore


def _manifest(core: str, commit: str, verdict: str) -> Manifest:
    return ledger_manifest(
        f"p-{core}-{commit}", (core, None), ("demo-plugin", commit * 40), verdict
    )


def _entry(core: str, commit: str, verdict: str, kind: str = "release") -> ledger.Draft:
    return ledger.entry_from_manifest(
        _manifest(core, commit, verdict),
        manifest_sha256="ab" * 32,
        runner="cpu",
        time="2026-12-01T00:00:00Z",
        kind=kind,
        lag=ledger.Lag(3, 0),
    )


@pytest.fixture
def signed(tmp_path: Path):
    key_path, pub_path = keys.generate_keypair(tmp_path / "k" / "m.key")
    key = keys.load_private_key(key_path)
    store = DirStore(tmp_path / "store")
    trust.append(store, _entry("0.25.1", "a", "pilot"), key)
    trust.append(store, _entry("0.26.0", "a", "lab"), key)
    trust.append(store, _entry("0.26.0", "b", "pilot"), key)
    return store, key, pub_path


def _lines(store: DirStore) -> list[bytes]:
    return (store.root / ledger.LEDGER_FILE).read_bytes().splitlines(keepends=True)


def _write(store: DirStore, lines: list[bytes]) -> None:
    (store.root / ledger.LEDGER_FILE).write_bytes(b"".join(lines))


def test_appended_entries_read_back_chained_and_filtered(signed) -> None:
    store, key, _ = signed
    entries = trust.read_ledger(store, key.public_key())
    assert [e.seq for e in entries] == [1, 2, 3]
    assert entries[0].raw["prev"] == ledger.GENESIS
    assert entries[1].raw["prev"] == ledger.line_digest(_lines(store)[0])
    assert entries[0].core == ledger.Party("vllm", "0.25.1", None)
    assert entries[0].python == "3.11" and entries[0].lag == ledger.Lag(3, 0)
    assert [e.seq for e in ledger.select(entries, core="0.26.0")] == [2, 3]
    assert [e.seq for e in ledger.select(entries, plugin="bbbb")] == [3]
    assert [e.seq for e in ledger.select(entries, verdict="lab")] == [2]
    assert ledger.select(entries, kind="nightly") == []


def test_matrix_is_generated_from_the_ledger_latest_verdict_wins(signed, tmp_path: Path) -> None:
    store, key, _ = signed
    trust.append(store, _entry("0.26.0", "a", "pilot"), key)  # the lab verdict is fixed
    m = ledger.matrix(trust.read_ledger(store, key.public_key()))
    assert m.cores == ["0.25.1", "0.26.0"]
    assert m.cells["0.26.0 | demo-plugin@aaaaaaaaaaaa"].verdict == "pilot"
    assert m.to_json()["cells"]["0.26.0 | demo-plugin@aaaaaaaaaaaa"]["seq"] == 4
    md = ledger.render_matrix_markdown(m)
    assert "| 0.26.0 | pilot (#4) | pilot (#3) |" in md


def _altered(line: bytes, **change: object) -> bytes:
    envelope = json.loads(line)
    payload = json.loads(base64.b64decode(envelope["payload"]))
    payload.update(change)
    envelope["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
    from vllm_plugin_release.core.cache import canonical_json

    return (canonical_json(envelope) + "\n").encode()


def test_an_altered_entry_is_refused_naming_its_line(signed) -> None:
    store, key, pub = signed
    lines = _lines(store)
    _write(store, [lines[0], _altered(lines[1], verdict="fleet"), lines[2]])
    with pytest.raises(GateFailed, match=r"ledger.jsonl:2: the signature does not verify"):
        trust.read_ledger(store, key.public_key())
    # a tampered ledger is never extended
    with pytest.raises(GateFailed):
        trust.append(store, _entry("0.27.0", "a", "pilot"), key)
    assert len(_lines(store)) == 3
    done = vpr("manifest", "ledger", "--store", str(store.root), "--key", str(pub), check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ledger.jsonl:2" in done.stdout + done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("how", ["removed", "reordered", "torn"])
def test_a_removed_reordered_or_torn_line_breaks_the_chain(signed, how: str) -> None:
    store, key, _ = signed
    lines = _lines(store)
    changed = {
        "removed": [lines[0], lines[2]],
        "reordered": [lines[0], lines[2], lines[1]],
        "torn": [lines[0], lines[1], lines[2][:-10]],
    }[how]
    _write(store, changed)
    with pytest.raises(GateFailed, match=r"ledger.jsonl:[23]: the (chain is broken|last line)"):
        trust.read_ledger(store, key.public_key())


def test_another_key_does_not_verify(signed, tmp_path: Path) -> None:
    store, _, _ = signed
    other, _ = keys.generate_keypair(tmp_path / "other" / "o.key")
    other_key = keys.load_private_key(other).public_key()
    # the store's head is checked first: signed by another key, so nothing is read from it
    with pytest.raises(GateFailed, match=r"head\.json: the signature does not verify") as err:
        trust.read_ledger(store, other_key)
    # Both keys are named: the head's and this run's (not "altered").
    signer = json.loads(_lines(store)[0])["signatures"][0]["keyid"][:16]
    assert f"signed by keyid {signer}, another key" in err.value.message
    assert attest.keyid(other_key)[:16] in err.value.message and "altered" not in err.value.message


def test_cli_prints_filters_and_renders_the_matrix(signed) -> None:
    store, _, pub = signed
    common = ("manifest", "ledger", "--store", str(store.root), "--key", str(pub))
    done = vpr(*common, "--core", "0.26.0")
    assert "#2 " in done.stdout and "#3 " in done.stdout and "#1 " not in done.stdout
    assert "lag 3 d / 0 minor" in done.stdout
    entries = json.loads(vpr(*common, "--json", "--verdict", "pilot").stdout)
    assert [e["seq"] for e in entries] == [1, 3]
    m = json.loads(vpr(*common, "--matrix", "json").stdout)
    assert m["cells"]["0.26.0 | demo-plugin@aaaaaaaaaaaa"]["verdict"] == "lab"
    none = vpr(*common, "--core", "9.9.9", check=False)
    assert none.returncode == 1 and "no ledger entry matches" in none.stderr


def test_last_known_good_pointer_is_signed_and_checked(tmp_path: Path) -> None:
    key_path, _ = keys.generate_keypair(tmp_path / "k" / "m.key")
    key = keys.load_private_key(key_path)
    store = DirStore(tmp_path / "store")
    assert trust.read_lkg(store, "demo", key.public_key()) is None
    pointer = schedule.Pointer(
        pairing="demo",
        core_url="https://example.invalid/core.git",
        core_commit="c" * 40,
        plugin_commit="d" * 40,
        time="2026-12-01T00:00:00Z",
    )
    path = trust.write_lkg(store, "demo", pointer, key)
    assert trust.read_lkg(store, "demo", key.public_key()) == pointer
    envelope = json.loads(path.read_text())
    moved = json.loads(base64.b64decode(envelope["payload"]))
    moved["core_commit"] = "e" * 40  # moved by hand
    envelope["payload"] = base64.b64encode(json.dumps(moved).encode()).decode()
    path.write_text(json.dumps(envelope))
    with pytest.raises(GateFailed, match=r"lkg/demo\.json: (not the file|larger than)"):
        trust.read_lkg(store, "demo", key.public_key())
    with pytest.raises(Exception, match="cannot name"):
        trust.write_lkg(store, "../x", pointer, key)


def test_nightly_schedule_backs_off_while_failing() -> None:
    import datetime as dt

    from vllm_plugin_release.core import schedule

    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    assert schedule.due(None, t0)[0]
    passed = schedule.after_run(None, t0, passed=True, commit="c1")
    assert not schedule.due(passed, t0 + dt.timedelta(hours=7))[0]
    assert schedule.due(passed, t0 + dt.timedelta(hours=8))[0]
    failed = schedule.after_run(passed, t0, passed=False, commit="c2")
    failed = schedule.after_run(failed, t0, passed=False, commit="c3")
    assert failed.failures == 2 and failed.last_commit == "c3"
    ok, why = schedule.due(failed, t0 + dt.timedelta(hours=8))
    assert not ok and "backing off: 2 failure(s)" in why
    assert schedule.due(failed, t0 + dt.timedelta(hours=24))[0]
    assert schedule.after_run(failed, t0, passed=True, commit="c4").failures == 0


def test_lag_comes_from_the_cadence_check_in_the_scorecard(tmp_path: Path) -> None:
    from vllm_plugin_release.flows.ledger import lag_from_scorecard

    assert lag_from_scorecard(tmp_path) is None  # no scorecard: no figure, never a guess
    from vllm_plugin_release.conform import CheckResult
    from vllm_plugin_release.conform.scorecard import scorecard

    details = {"lag_minor": 1, "lag_days": 26}
    cadence = CheckResult("cadence", "pass", "ok", details=details)
    card = scorecard(
        [cadence],
        runner="cpu",
        pairing={
            "name": "p",
            "core": "vllm 0.1",
            "plugin": "plug 0.1",
            "core_wheel_sha256": None,
            "plugin_wheel_sha256": None,
        },
    )
    (tmp_path / "scorecard.json").write_text(json.dumps(card))
    lag = lag_from_scorecard(tmp_path)
    assert lag is not None and lag.to_json() == {"days": 26, "minor_releases": 1}
    card["checks"]["cadence"]["details"] = {"reason": "no releases"}
    (tmp_path / "scorecard.json").write_text(json.dumps(card))
    assert lag_from_scorecard(tmp_path) is None
    # a file that is not a scorecard (here: no verdict) gives no figure either
    partial = {"checks": {"cadence": {"status": "pass", "details": details}}}
    (tmp_path / "scorecard.json").write_text(json.dumps(partial))
    assert lag_from_scorecard(tmp_path) is None


def test_a_line_that_is_not_a_signed_entry_is_refused(signed) -> None:
    store, key, _ = signed
    lines = _lines(store)
    _write(store, [lines[0], b'{"payload": "not base64!", "payloadType": "x"}\n', lines[2]])
    with pytest.raises(GateFailed, match=r"ledger\.jsonl:2: not a signed ledger entry"):
        trust.read_ledger(store, key.public_key())
    with pytest.raises(Exception, match="ledger kind 'bisect'"):
        _entry("0.26.0", "a", "pilot", kind="bisect")


def test_a_signed_entry_of_another_shape_is_bad_input_naming_its_line(signed) -> None:
    """Found by tests/faults/test_store_fuzz.py: a validly signed line whose `core` is a list
    crashed the filters (AttributeError); now the ledger is refused at that line (exit 2)."""
    from tests.pairing import sign_store
    from vllm_plugin_release.core.errors import BadInput
    from vllm_plugin_release.edges.store import sign_head

    store, key, pub = signed
    entries = [json.loads(base64.b64decode(json.loads(line)["payload"])) for line in _lines(store)]
    entries[0]["core"] = ["0.26"]
    lines: list[bytes] = []
    for entry in entries:  # signed and chained again, as a buggy writer would have
        entry["prev"] = ledger.line_digest(lines[-1]) if lines else ledger.GENESIS
        lines.append(signing.sign(signing.payload_of(entry), ledger.PAYLOAD_TYPE, key))
    _write(store, lines)
    with pytest.raises(BadInput, match="not a ledger entry"):  # a writer never vouches for it
        sign_head(store.root, key, everything=True)
    sign_store(store.root, key, check=False)  # a buggy publisher did: the reader checks too
    with pytest.raises(BadInput, match=r"ledger\.jsonl:1: a signed entry that is not a ledger"):
        trust.read_ledger(store, key.public_key())
    done = vpr("manifest", "ledger", "--store", str(store.root), "--key", str(pub), "--core", "x",
               check=False)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr


def test_the_schedule_state_keeps_its_bytes_and_reads_back() -> None:
    import datetime as dt

    from vllm_plugin_release.core import schedule

    t0 = dt.datetime(2026, 12, 1, 8, 30, 15, 999, tzinfo=dt.timezone.utc)
    state = schedule.after_run(None, t0, passed=False, commit="c" * 40)
    old = {  # what after_run returned before it was typed
        "last_run": "2026-12-01T08:30:15Z",
        "last_commit": "c" * 40,
        "last_result": "fail",
        "failures": 1,
    }
    assert json.dumps(state.to_json()) == json.dumps(old)
    assert schedule.parse_state(old) == state._replace(last_run=t0.replace(microsecond=0))
    assert schedule.parse_state(None) is None and schedule.parse_state({"failures": 3}) is None
    with pytest.raises(schedule.StateUnreadable, match="last_run, failures"):
        schedule.parse_state({**old, "failures": True})


def _resigned(store: DirStore, key, edit) -> None:
    """The store's ledger with `edit(entries)` applied, signed and chained again (as a
    buggy writer would), and a head over it (as a buggy publisher would)."""
    from tests.pairing import sign_store

    entries = [json.loads(base64.b64decode(json.loads(line)["payload"])) for line in _lines(store)]
    edit(entries)
    lines: list[bytes] = []
    for entry in entries:
        entry["prev"] = ledger.line_digest(lines[-1]) if lines else ledger.GENESIS
        lines.append(signing.sign(signing.payload_of(entry), ledger.PAYLOAD_TYPE, key))
    _write(store, lines)
    sign_store(store.root, key, check=False)


def test_a_seq_of_true_is_not_entry_one(signed) -> None:
    """JSON `true` equals 1 in Python: a first line numbered `true` passed the chain check
    and was printed as `#True`; now the chain is broken at that line."""
    store, key, _ = signed

    def number_true(entries: list) -> None:
        entries[0]["seq"] = True

    _resigned(store, key, number_true)
    with pytest.raises(GateFailed, match=r"ledger\.jsonl:1: the chain is broken \(seq True"):
        trust.read_ledger(store, key.public_key())


def test_a_lag_that_is_not_a_count_is_not_a_ledger_entry(signed) -> None:
    """A lag's days or minor releases of another type (text, true) was taken in: printed
    as is and, for `true`, shown by the site as a lag of `true` days; now the ledger is
    refused at that line (exit 2)."""
    from vllm_plugin_release.core.errors import BadInput

    store, key, _ = signed

    def lag_text(entries: list) -> None:
        entries[1]["lag"] = {"days": True, "minor_releases": 0}

    _resigned(store, key, lag_text)
    with pytest.raises(BadInput, match=r"ledger\.jsonl:2: .*'lag\.days' is True, expected int"):
        trust.read_ledger(store, key.public_key())


def test_a_head_record_whose_count_is_not_a_count_is_not_a_store_head(signed) -> None:
    """The head's file records are typed (`FileRecord`): a ledger record whose count or
    last entry is of another type is refused when the head is read, naming the file."""
    from vllm_plugin_release.core import storehead as sh
    from vllm_plugin_release.edges.store import read_head

    store, key, _ = signed
    where = str(store.root / sh.HEAD_FILE)
    head = read_head(store.root, key.public_key(), where)
    assert head is not None
    record = head.files[ledger.LEDGER_FILE]
    assert record == sh.ledger_record((store.root / ledger.LEDGER_FILE).read_bytes())
    body = json.loads(
        base64.b64decode(json.loads((store.root / sh.HEAD_FILE).read_text())["payload"])
    )
    assert body["files"][ledger.LEDGER_FILE] == record.to_json()  # as written: 4 keys
    assert list(record.to_json()) == ["sha256", "size", "count", "last"]
    body["files"][ledger.LEDGER_FILE]["count"] = "3"
    line = signing.sign(signing.payload_of(body), sh.PAYLOAD_TYPE, key)
    (store.root / sh.HEAD_FILE).write_bytes(line)
    with pytest.raises(GateFailed, match=r"not a store head \(files\['ledger/ledger\.jsonl'\]"):
        read_head(store.root, key.public_key(), where)


def test_a_repair_entry_is_checked_shown_and_left_out_of_the_matrix() -> None:
    from vllm_plugin_release.core import ledger as lg

    repair = lg.Repair("index.json", "missing", "sha256 ab, 10 bytes", 7, "rebuilt")
    draft = lg.repair_entry(repair, "2026-12-01T00:00:00Z")
    entry = lg.chained(draft, None, 0)
    assert lg.entry_problem(entry.raw) is None
    assert entry.raw["repair"] == repair.to_json() and entry.verdict is None
    shown = lg.render_lines([entry])
    assert "index.json: not the file the store's signed head (version 7)" in shown
    assert "found missing" in shown and "restored: rebuilt" in shown
    assert lg.matrix([entry]).cells == {}
    without = {k: v for k, v in entry.raw.items() if k != "repair"}
    assert "'repair' is not an object" in str(lg.entry_problem(without))
    broken = {**entry.raw, "repair": {**repair.to_json(), "head_version": "7"}}
    assert "'repair.head_version'" in str(lg.entry_problem(broken))


def test_a_signed_line_verifies_only_as_its_key_signed_it(tmp_path: Path) -> None:
    """`signed.verify` (heads, ledger lines, pointers): a line of this key verifies, also
    beside another key's signature; any other bytes for it are refused: the envelope
    written another way, a payload with a character outside base64, another payload type,
    a broken signature of this key beside its good one (a line changed, still "signed")."""
    key = keys.load_private_key(keys.generate_keypair(tmp_path / "m.key")[0])
    other = keys.load_private_key(keys.generate_keypair(tmp_path / "o.key")[0])
    kind, payload = "application/vnd.test+json", signing.payload_of({"n": 1})
    line = signing.sign(payload, kind, key)

    def verify(data: bytes, payload_type: str = kind) -> bytes:
        return signing.verify(data, payload_type, key.public_key(), "L", what="line", hint="")

    def written(envelope: dict) -> bytes:
        return (canonical_json(envelope) + "\n").encode()

    assert verify(line) == payload
    envelope = json.loads(line)
    theirs = json.loads(signing.sign(payload, kind, other))["signatures"]
    assert verify(written({**envelope, "signatures": theirs + envelope["signatures"]})) == payload
    with pytest.raises(GateFailed, match="canonical form"):
        verify(json.dumps(envelope, indent=1).encode() + b"\n")
    b64 = envelope["payload"]
    with pytest.raises(GateFailed, match="L: not a signed line"):
        verify(written({**envelope, "payload": f"{b64[:4]}!{b64[4:]}"}))
    with pytest.raises(GateFailed, match="L: not a signed line"):
        verify(signing.sign(payload, "application/vnd.other+json", key))
    (mine,) = envelope["signatures"]
    broken = {**mine, "sig": base64.b64encode(bytes(64)).decode()}
    with pytest.raises(GateFailed, match="altered"):
        verify(written({**envelope, "signatures": [broken, mine]}))
    with pytest.raises(GateFailed, match="altered"):  # no signature: not "another key"
        verify(written({**envelope, "signatures": []}))


def test_each_line_is_verified_unless_the_head_vouches_for_the_whole(tmp_path: Path) -> None:
    """parse_ledger as a writer calls it (before it signs a head over the ledger): a line
    another key signed, chained in its place, is refused; `vouched` (the bytes a verified
    head names by sha256) reads it, the chain still checked."""
    key = keys.load_private_key(keys.generate_keypair(tmp_path / "m.key")[0])
    other = keys.load_private_key(keys.generate_keypair(tmp_path / "o.key")[0])
    first = ledger.sign_line(ledger.chained(_entry("0.26.0", "a", "pilot"), None, 0), key)
    second = ledger.sign_line(ledger.chained(_entry("0.26.0", "a", "lab"), first, 1), other)
    pub = key.public_key()
    assert [e.verdict for e in ledger.parse_ledger(first, pub, "L")] == ["pilot"]
    with pytest.raises(GateFailed, match="L:2: the signature does not verify"):
        ledger.parse_ledger(first + second, pub, "L")
    read = ledger.parse_ledger(first + second, pub, "L", vouched=True)
    assert [e.seq for e in read] == [1, 2]
