"""What the nightly reads back from its store: the last-known-good pointer is signed and
bound to its pairing and to the store's current state (a pointer of another pairing, or an
old one put back, is refused); the schedule never silences the nightly (a `last_run` in
the future or of the wrong type means: run now); a killed ledger write leaves no temp
file for good (the next writer sweeps it)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from vllm_plugin_release.core import ledger, schedule
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.edges import keys, trust
from vllm_plugin_release.edges.store import DirStore

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)


@pytest.fixture
def store(tmp_path: Path):
    private, _ = keys.generate_keypair(tmp_path / "k" / "m.key")
    return DirStore(tmp_path / "store"), keys.load_private_key(private)


def _pointer(pairing: str, commit: str) -> schedule.Pointer:
    return schedule.Pointer(
        pairing=pairing,
        core_url="https://example.invalid/vllm.git",
        core_commit=commit * 40,
        plugin_commit="d" * 40,
        time="2026-12-01T00:00:00Z",
    )


def test_a_pointer_of_another_pairing_is_refused(store) -> None:
    target, key = store
    trust.write_lkg(target, "demo", _pointer("other", "c"), key)
    with pytest.raises(GateFailed, match="other"):
        trust.read_lkg(target, "demo", key.public_key())


def test_an_old_pointer_put_back_is_refused(store) -> None:
    target, key = store
    path = trust.write_lkg(target, "demo", _pointer("demo", "a"), key)
    old = path.read_bytes()
    trust.write_lkg(target, "demo", _pointer("demo", "b"), key)
    assert trust.read_lkg(target, "demo", key.public_key()).core_commit == "b" * 40
    path.write_bytes(old)  # validly signed, but no longer the store's pointer
    with pytest.raises(GateFailed, match=r"lkg/demo\.json"):
        trust.read_lkg(target, "demo", key.public_key())


@pytest.mark.parametrize(
    "state",
    [
        {"last_run": "2999-01-01T00:00:00Z", "failures": 0},
        {"last_run": "2999-01-01T00:00:00Z", "failures": 3},
        {"last_run": 5, "failures": 0},
        {"last_run": "2026-12-01T11:00:00Z", "failures": "x"},
        {"last_run": "2026-12-01T11:00:00Z", "failures": []},
        {"last_run": ["2026"], "failures": None},
        {"last_run": "2026-12-01T11:00:00Z", "failures": 10**30},
    ],
)
def test_a_schedule_in_the_future_or_of_wrong_types_does_not_silence_the_nightly(
    state: dict,
) -> None:
    # as the nightly reads it from the store: the verified payload, then whether a run is due
    parsed = schedule.state_from(json.dumps(state).encode(), "schedule.json")
    run, why = schedule.due(parsed, NOW)
    assert run, why
    if "after now" not in why:  # of wrong types: read as no state
        assert parsed is None and why == "no earlier run"


def test_a_passing_schedule_still_waits_its_interval() -> None:
    passed = schedule.after_run(None, NOW, passed=True, commit="c1")
    assert not schedule.due(passed, NOW + dt.timedelta(hours=1))[0]


def test_a_killed_ledger_writes_temp_file_is_swept_by_the_next_writer(store) -> None:
    target, key = store
    entry = ledger.Draft(
        kind="release",
        pairing_id="p",
        core=ledger.Party("vllm", "0.26.0", None),
        plugin=ledger.Party("demo", "1.0", "d" * 40),
        runtime=(None, None),
        python=None,
        verdict="pilot",
        runner=None,
        time="2026-12-01T00:00:00Z",
        manifest_sha256=None,
    )
    trust.append(target, entry, key)
    folder = target.root / "ledger"
    left = folder / ".ledger.jsonl.k1ll3d.tmp"  # what atomic_write_bytes leaves when killed
    left.write_bytes(b"half a line")
    trust.append(target, entry, key)
    assert not left.exists()
    names = {Path(ledger.LEDGER_FILE).name, "summary.json", "summary"}  # the ledger, its summary
    assert {p.name for p in folder.iterdir()} == names
