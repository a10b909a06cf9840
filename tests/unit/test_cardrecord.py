"""scorecard.json read back (core/cardrecord): bounded, checked key by key, typed, written
back from its fields; the hardware runner's `collect`, the conform stage's cache, the
ledger's lag and the manifest read it so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vllm_plugin_release.conform import CheckResult, Evidence
from vllm_plugin_release.conform.checks import hardware
from vllm_plugin_release.conform.scorecard import scorecard
from vllm_plugin_release.core import cardrecord, records
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.ledger import Lag
from vllm_plugin_release.flows.ledger import lag_from_scorecard

FACTS = {
    "pairing_id": "f" * 64,
    "wheels": [{"role": "core", "filename": "vllm-0.1-py3-none-any.whl", "sha256": "a" * 64}],
    "runtime": {"name": "rt", "status": "absent"},
    "certified_on": "2026-01-02",
    "tool": {"name": "vllm-plugin-release", "version": "0.1.0"},
    "replay": {
        "ratios": {"itl_p50_s": 1.0, "ttft_p99_s": None},
        "mixed_step_share": {"plugin": 0.0, "upstream": 0.2},
        "paths": {"default": {"requests": 3, "share": None}},
        "plots": ["replay-steps.png"],
    },
}


def _card(runner: str = "hardware", blocked: dict[str, str] | None = None) -> dict[str, Any]:
    results = [
        CheckResult("isolation", "pass", "ok", [Evidence("seen", file="a.py", line=3)]),
        CheckResult("cadence", "warn", "behind", details={"lag_minor": 8, "lag_days": 113}),
    ]
    pairing = {
        "name": "hw",
        "core": "vllm 0.1",
        "plugin": "plug 0.1",
        "core_wheel_sha256": None,
        "plugin_wheel_sha256": None,
    }
    return scorecard(results, runner=runner, pairing=pairing, facts=FACTS, blocked=blocked)


def _write(dist: Path, card: Any) -> Path:
    dist.mkdir(exist_ok=True)
    path = dist / records.SCORECARD
    path.write_text(json.dumps(card))
    return path


def test_a_real_scorecard_reads_back_typed_and_whole(tmp_path: Path) -> None:
    card = _card()
    _write(tmp_path, card)
    read = cardrecord.read(tmp_path)
    assert read.verdict == card["verdict"] and read.runner == "hardware"
    assert [r.name for r in read.results] == ["cadence", "isolation"]
    assert read.results[1].evidence == [Evidence("seen", file="a.py", line=3)]
    # the typed checks serialise back to what was read
    assert {r.name: r.to_json() for r in read.results} == card["checks"]
    assert read.to_json() == card  # written back whole, from the fields
    with pytest.raises(AttributeError):
        read.verdict = "fleet"  # type: ignore[misc]


def test_a_blocked_card_with_its_facts_is_written_back_whole() -> None:
    card = _card("cpu", {"reason": "no python", "hint": "install it"})
    assert set(FACTS) < set(card) and card["blocked"]["hint"] == "install it"
    assert cardrecord.parse(card, "scorecard.json").to_json() == card


def _mutations() -> list[tuple[str, Any]]:
    base = _card()

    def edit(change: Any) -> dict[str, Any]:
        card = json.loads(json.dumps(base))
        change(card)
        return card

    return [
        ("not a JSON object", [1, 2]),
        ("verdict", edit(lambda c: c.update(verdict="gold"))),
        ("runner", edit(lambda c: c.pop("runner"))),
        ("pairing", edit(lambda c: c.update(pairing="hw"))),
        ("pairing.core", edit(lambda c: c["pairing"].pop("core"))),
        ("wheels.0.sha256", edit(lambda c: c["wheels"][0].update(sha256=5))),
        ("tool.version", edit(lambda c: c["tool"].pop("version"))),
        ("replay.ratios.itl_p50_s", edit(lambda c: c["replay"]["ratios"].update(itl_p50_s="1"))),
        ("replay.plots", edit(lambda c: c["replay"].update(plots="a.png"))),
        ("explanation.why", edit(lambda c: c["explanation"].update(why="all"))),
        ("deferred.0.reason", edit(lambda c: c["deferred"].append({"reason": 5}))),
        ("checks", edit(lambda c: c.pop("checks"))),
        ("checks.isolation", edit(lambda c: c["checks"].update(isolation=[]))),
        ("checks.isolation.status", edit(lambda c: c["checks"]["isolation"].pop("status"))),
        ("checks.isolation.status", edit(lambda c: c["checks"]["isolation"].update(status="ok"))),
        ("checks.isolation.summary", edit(lambda c: c["checks"]["isolation"].update(summary=1))),
        ("checks.isolation.evidence", edit(lambda c: c["checks"]["isolation"].update(evidence={}))),
        (
            "checks.isolation.evidence.0",
            edit(lambda c: c["checks"]["isolation"]["evidence"][0].update(where="x")),
        ),
        (
            "checks.isolation.evidence.0.note",
            edit(lambda c: c["checks"]["isolation"]["evidence"][0].pop("note")),
        ),
        (
            "checks.isolation.evidence.0.line",
            edit(lambda c: c["checks"]["isolation"]["evidence"][0].update(line="3")),
        ),
        ("checks.cadence.details", edit(lambda c: c["checks"]["cadence"].update(details=None))),
        ("checks.cadence.threshold", edit(lambda c: c["checks"]["cadence"].update(threshold=[]))),
    ]


@pytest.mark.parametrize(("key", "card"), _mutations(), ids=[k for k, _ in _mutations()])
def test_a_bad_scorecard_is_bad_input_naming_the_file_and_key(
    tmp_path: Path, key: str, card: Any
) -> None:
    path = _write(tmp_path, card)
    with pytest.raises(BadInput) as caught:
        cardrecord.read(tmp_path)
    assert str(path) in caught.value.message and key in caught.value.message


def test_an_oversized_scorecard_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, _card())
    monkeypatch.setattr(records, "MAX_RECORD", path.stat().st_size - 1)
    with pytest.raises(BadInput, match="larger than"):
        cardrecord.read(tmp_path)


def test_hardware_collect_refuses_a_scorecard_without_checks(tmp_path: Path) -> None:
    card = _card()
    del card["checks"]
    _write(tmp_path, card)
    check = CheckResult("hardware", "deferred", "not run")
    with pytest.raises(BadInput, match="checks"):  # was a KeyError (a traceback)
        hardware.collect(tmp_path, check)
    assert json.loads((tmp_path / records.SCORECARD).read_text()) == card  # nothing written


def test_hardware_collect_keeps_the_cpu_checks_and_adds_its_own(tmp_path: Path) -> None:
    _write(tmp_path, _card())
    new = hardware.collect(tmp_path, CheckResult("hardware", "deferred", "not run"))
    assert sorted(r.name for r in new.results) == ["cadence", "hardware", "isolation"]
    assert new.to_json()["checks"]["isolation"] == _card()["checks"]["isolation"]
    assert new.to_json() == json.loads((tmp_path / records.SCORECARD).read_text())


def test_the_ledger_reads_the_lag_and_ignores_a_bad_card(tmp_path: Path) -> None:
    _write(tmp_path, _card())
    lag = lag_from_scorecard(tmp_path)
    assert lag == Lag(113, 8) and lag is not None
    assert list(lag.to_json().items()) == [("days", 113), ("minor_releases", 8)]  # as written
    for bad in ("8", -1, True, None):  # hostile: a lag that is not a count is no lag
        card = _card()
        card["checks"]["cadence"]["details"]["lag_minor"] = bad
        _write(tmp_path, card)
        assert lag_from_scorecard(tmp_path) is None
    card = _card()
    card["checks"]["cadence"]["status"] = "great"
    _write(tmp_path, card)
    assert lag_from_scorecard(tmp_path) is None


def test_a_bad_cached_scorecard_is_not_reused(tmp_path: Path) -> None:
    from vllm_plugin_release.conform.suite import _cached_card

    assert _cached_card(tmp_path) is None  # nothing cached
    _write(tmp_path, _card())
    cached = _cached_card(tmp_path)
    assert cached is not None and cached.to_json() == _card()
    (tmp_path / records.SCORECARD).write_text('{"verdict": "fleet"')  # cut short
    assert _cached_card(tmp_path) is None  # the checks run again; was a JSONDecodeError
    _write(tmp_path, {**_card(), "checks": {"api": {"status": "passed"}}})
    assert _cached_card(tmp_path) is None


def test_the_verdict_line_reads_the_typed_card(tmp_path: Path) -> None:
    from vllm_plugin_release.conform.suite import verdict_line

    card = _card()
    read = cardrecord.parse(card, "scorecard.json")
    counts = ", ".join(f"{n} {s}" for s, n in card["summary"].items() if n)  # the old line's
    where = tmp_path / records.SCORECARD_MD
    assert verdict_line(read, tmp_path) == f"conform: verdict {card['verdict']} ({where}); {counts}"
    assert counts == "1 pass, 1 warn"
