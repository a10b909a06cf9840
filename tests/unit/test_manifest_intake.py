"""The manifest stage's intake of env.json (its one typed reader, `core/envrecord`) and
scorecard.json: a value the manifest copies is checked when the record is read, naming
the record and the key, never the schema's message about manifest.json or a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import make_pairing
from vllm_plugin_release.core import records
from vllm_plugin_release.core.attest import SpecPins
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.stages import manifest as mf

WHEEL = {"filename": "ttnn-0.60.0-cp311-none-linux_x86_64.whl", "sha256": "a" * 64, "size": 1}


def _edited(
    tmp_path: Path, name: str, change: Callable[[dict[str, Any]], None]
) -> tuple[Path, SpecPins]:
    dist = tmp_path / "dist" / "ref"
    pins = make_pairing(dist)
    path = dist / name
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return dist, pins


def _runtime(**runtime: object) -> Callable[[dict[str, Any]], None]:
    return lambda env: env.__setitem__("runtime", runtime)


ENV_SCHEMA_REFUSED = {
    "runtime name a number": (_runtime(name=5, status="absent"), "runtime.name"),
    "present version a number": (_runtime(status="present", version=5), "runtime.version"),
    "present commit a list": (_runtime(status="present", commit=[1]), "runtime.commit"),
    "present wheel without sha256": (
        _runtime(status="present", wheel={"filename": "x.whl", "size": 1}),
        "runtime.wheel.sha256",
    ),
    "present wheel size a text": (
        _runtime(status="present", wheel={**WHEEL, "size": "1"}),
        "runtime.wheel.size",
    ),
    "present wheel another key": (
        _runtime(status="present", wheel={**WHEEL, "x": 1}),
        "runtime.wheel.x",
    ),
    "lock_file a number": (lambda env: env.__setitem__("lock_file", 5), "lock_file"),
    "lock_sha256 a number": (lambda env: env.__setitem__("lock_sha256", 5), "lock_sha256"),
}


@pytest.mark.parametrize("case", list(ENV_SCHEMA_REFUSED.values()), ids=list(ENV_SCHEMA_REFUSED))
def test_an_env_value_the_manifest_schema_refuses_is_bad_input_naming_the_key(
    tmp_path: Path, case: tuple[Callable[[dict[str, Any]], None], str]
) -> None:
    """Each would be refused only by the manifest's schema, naming manifest.json's key: it
    is refused when env.json is read, naming env.json's key and `vpr env` (exit 2)."""
    change, key = case
    dist, _ = _edited(tmp_path, records.ENV, change)
    with pytest.raises(BadInput) as info:
        mf.read_records(dist)
    assert f"env.json: incomplete record: '{key}'" in info.value.message
    assert info.value.exit_code == 2 and "run `vpr env" in (info.value.hint or "")


def test_an_absent_runtimes_version_commit_and_wheel_are_not_copied(tmp_path: Path) -> None:
    """What the lock would install of a runtime the environment did not find is not the
    pairing's: the manifest shows the runtime absent, with the reason env.json gives."""
    change = _runtime(status="absent", version="1.0", commit="abc", wheel=WHEEL, reason="no card")
    dist, pins = _edited(tmp_path, records.ENV, change)
    m = mf.build_manifest(pins, mf.read_records(dist))
    assert m["runtime"]["note"] == "absent on this runner (cpu): no card"
    assert m["runtime"]["version"] is None and "wheel" not in m["runtime"]
    present = _runtime(status="present", version="1.0", commit="abc", wheel=WHEEL)
    dist, pins = _edited(tmp_path / "present", records.ENV, present)
    m = mf.build_manifest(pins, mf.read_records(dist))
    assert m["runtime"]["version"] == "1.0" and m["runtime"]["wheel"] == WHEEL


def test_a_garbled_env_json_is_bad_input_before_the_verdict_is_judged(tmp_path: Path) -> None:
    """env.json is read whole before the manifest is made: a garbled one is bad input
    (exit 2) even when scorecard.json's verdict also contradicts its checks (the gate
    failure, exit 1, came first when env.json's checks were read last)."""
    dist, pins = _edited(tmp_path, records.ENV, lambda env: env.__setitem__("checks", 5))
    card = json.loads((dist / records.SCORECARD).read_text())
    card["verdict"] = "fleet"  # but the hardware check is deferred
    (dist / records.SCORECARD).write_text(json.dumps(card))
    with pytest.raises(BadInput, match=r"env\.json: incomplete record: 'checks'") as info:
        mf.build_manifest(pins, mf.read_records(dist))
    assert info.value.exit_code == 2


def _check(**result: object) -> Callable[[dict[str, Any]], None]:
    return lambda card: card["checks"]["cadence"].update(result)


FEATURE = {"feature": "logprobs", "needed": True, "outcome": "supported"}


def _workload(
    features: list[object] | None = None, paths: dict[str, object] | None = None, **more: object
) -> Callable[[dict[str, Any]], None]:
    facts = {"features": features or [], "paths": paths or {}, "models": {}, **more}
    return lambda card: card.update(workload=facts)


CARD_SCHEMA_REFUSED = {
    "status not a status": (_check(status="bogus"), "checks.cadence.status"),
    "status null": (_check(status=None), "checks.cadence.status"),
    "runner a number": (lambda card: card.update(runner=5), "runner"),
    "workload platform a number": (_workload(platform=5), "workload.platform"),
    "feature without name": (
        _workload([{"needed": True, "outcome": "supported"}]),
        "workload.features.0.feature",
    ),
    "feature share null": (_workload([{**FEATURE, "share": None}]), "workload.features.0.share"),
    "feature outcome unknown": (
        _workload([{**FEATURE, "outcome": "meh"}]),
        "workload.features.0.outcome",
    ),
    "feature needed a text": (
        _workload([{**FEATURE, "needed": "yes"}]),
        "workload.features.0.needed",
    ),
    "path requests a text": (
        _workload(paths={"a": {"requests": "1", "share": 0}}),
        "workload.paths.a.requests",
    ),
    "path without share": (_workload(paths={"a": {"requests": 1}}), "workload.paths.a.share"),
    "path instead_of a number": (
        _workload(paths={"a": {"requests": 1, "share": 0, "instead_of": 3}}),
        "workload.paths.a.instead_of",
    ),
    "plan verdict unknown": (
        lambda card: [_workload()(card), card.update(plans={"p": {"verdict": "gold"}})],
        "plans.p.verdict",
    ),
    "model a number": (
        lambda card: card.update(workload={"models": {"model": 5}}),
        "workload.models.model",
    ),
    "listed a text": (
        lambda card: card.update(workload={"models": {"listed": "yes"}}),
        "workload.models.listed",
    ),
}


@pytest.mark.parametrize("case", list(CARD_SCHEMA_REFUSED.values()), ids=list(CARD_SCHEMA_REFUSED))
def test_a_scorecard_value_the_manifest_schema_refuses_is_bad_input_naming_the_key(
    tmp_path: Path, case: tuple[Callable[[dict[str, Any]], None], str]
) -> None:
    """Each was refused only by the manifest's schema, naming manifest.json's key (exit 2
    as now): it is refused when scorecard.json is read, naming its key and `vpr conform`."""
    change, key = case
    dist, _ = _edited(tmp_path, records.SCORECARD, change)
    with pytest.raises(BadInput) as info:
        mf.read_records(dist)
    assert f"scorecard.json: '{key}' must be" in info.value.message
    assert info.value.exit_code == 2 and "re-run `vpr conform" in (info.value.hint or "")


TRACEBACKS = {
    "a status that is a list": (_check(status=["pass"]), "checks.cadence.status"),
    "a deferred check that is a list": (
        lambda card: card.update(deferred=[{"check": ["gpu"], "reason": "r"}]),
        "deferred.0.check",
    ),
}


@pytest.mark.parametrize("case", list(TRACEBACKS.values()), ids=list(TRACEBACKS))
def test_a_scorecard_value_that_was_a_traceback_is_bad_input(
    tmp_path: Path, case: tuple[Callable[[dict[str, Any]], None], str]
) -> None:
    """Each was a TypeError out of `vpr manifest build` (unhashable); it is bad input
    naming scorecard.json and the key."""
    change, key = case
    dist, pins = _edited(tmp_path, records.SCORECARD, change)
    with pytest.raises(BadInput) as info:
        mf.build_manifest(pins, mf.read_records(dist))
    assert f"scorecard.json: '{key}' must be" in info.value.message
    assert info.value.exit_code == 2


def test_a_fleet_verdict_beside_an_unknown_status_is_bad_input(tmp_path: Path) -> None:
    """A status the schema refuses under a fleet verdict was a gate failure (exit 1: the
    check 'did not pass'); it is bad input naming the key (exit 2)."""

    def change(card: dict[str, Any]) -> None:
        card["verdict"] = "fleet"
        card["checks"]["hardware"]["status"] = "pass"
        card["checks"]["cadence"]["status"] = "bogus"

    dist, pins = _edited(tmp_path, records.SCORECARD, change)
    with pytest.raises(BadInput, match=r"'checks\.cadence\.status' must be") as info:
        mf.build_manifest(pins, mf.read_records(dist))
    assert info.value.exit_code == 2


def test_the_manifest_keeps_five_evidence_items_and_counts_them_all(tmp_path: Path) -> None:
    """The first EVIDENCE_KEPT items (note, file, line, source; never a value), how many
    there are, and a deferred item naming a check of the card listed once."""
    evidence = [{"note": f"n{i}", "line": i, "value": [i], "source": "s"} for i in range(6)]

    def change(card: dict[str, Any]) -> None:
        _check(evidence=evidence)(card)
        card.update(deferred=[{"check": "hardware", "reason": "again", "run_with": ""}])

    dist, pins = _edited(tmp_path, records.SCORECARD, change)
    section = mf.build_manifest(pins, mf.read_records(dist))["conformance"]
    kept = [{"note": f"n{i}", "line": i, "source": "s"} for i in range(5)]
    assert section["checks"]["cadence"]["evidence"] == kept
    assert section["checks"]["cadence"]["evidence_count"] == 6
    assert section["deferred"] == [{"check": "hardware", "reason": "needs a TT device"}]
    assert "workload" not in section


LOOSE = {
    "evidence a text": (_check(evidence="plain"), "checks.cadence.evidence"),
    "evidence item a text": (_check(evidence=["plain"]), "checks.cadence.evidence"),
    "summary null": (_check(summary=None), "checks.cadence.summary"),
    "deferred item a text": (lambda card: card.update(deferred=["x"]), "deferred"),
    "workload a number": (lambda card: card.update(workload=5), "workload"),
    "no pairing": (lambda card: card.pop("pairing"), "pairing"),
}


@pytest.mark.parametrize("case", list(LOOSE.values()), ids=list(LOOSE))
def test_a_card_conform_refuses_is_refused_by_the_manifest_too(
    tmp_path: Path, case: tuple[Callable[[dict[str, Any]], None], str]
) -> None:
    """scorecard.json has one reader: what conform's read refused and the manifest's own
    reader let through is bad input for the manifest too, naming the key."""
    change, key = case
    dist, _ = _edited(tmp_path, records.SCORECARD, change)
    with pytest.raises(BadInput, match=f"scorecard.json: '{key}"):
        mf.read_records(dist)
