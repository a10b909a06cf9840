"""The manifest stage's intake of env.json and scorecard.json (`stages/manifestenv`,
`stages/manifestcard`): typed records read once; a value the manifest copies is checked
as its schema checks it, at once, naming the record and the key (it was the schema's
message about manifest.json, or a traceback); one it never copies is not read."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import make_pairing
from vllm_plugin_release.core import records
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.specpins import SpecPins
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
    """Each was refused only by the manifest's schema, naming manifest.json's key (exit 2
    as now): it is refused when env.json is read, naming env.json's key and `vpr env`."""
    change, key = case
    dist, _ = _edited(tmp_path, records.ENV, change)
    with pytest.raises(BadInput) as info:
        mf.read_records(dist)
    assert info.value.message.startswith(f"env.json: '{key}' must be")
    assert info.value.exit_code == 2 and "re-run `vpr env" in (info.value.hint or "")


def test_what_the_manifest_never_copies_of_env_json_is_not_read(tmp_path: Path) -> None:
    """An absent runtime's version, commit and wheel are not copied (the manifest never
    did): any value there is accepted; a reason that is not text shows as its text."""
    change = _runtime(status="absent", version=5, commit=[1], wheel={"x": 1}, reason=[1, "a"])
    dist, pins = _edited(tmp_path, records.ENV, change)
    m = mf.build_manifest(pins, mf.read_records(dist))
    assert m["runtime"]["note"] == "absent on this runner (cpu): [1, 'a']"
    assert m["runtime"]["version"] is None and "wheel" not in m["runtime"]


def test_a_garbled_env_json_is_bad_input_before_the_verdict_is_judged(tmp_path: Path) -> None:
    """env.json is read whole before the manifest is made: a garbled one is bad input
    (exit 2) even when scorecard.json's verdict also contradicts its checks (the gate
    failure, exit 1, came first when env.json's checks were read last)."""
    dist, pins = _edited(tmp_path, records.ENV, lambda env: env.__setitem__("checks", 5))
    card = json.loads((dist / records.SCORECARD).read_text())
    card["verdict"] = "fleet"  # but the hardware check is deferred
    (dist / records.SCORECARD).write_text(json.dumps(card))
    with pytest.raises(BadInput, match=r"env\.json: 'checks' must be a list") as info:
        mf.build_manifest(pins, mf.read_records(dist))
    assert info.value.exit_code == 2
