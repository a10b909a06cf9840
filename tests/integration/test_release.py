"""`vpr release` end to end on the reference pairing: every stage, a real loopback index."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import REFERENCE_SPEC, vpr


def test_release_reference_pairing(
    reference_env: dict, session_dist: Path, cache_root: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    key = tmp_path / "keys" / "release.key"
    vpr("keys", "generate", "--out", str(key))
    common = [
        "--spec",
        str(REFERENCE_SPEC),
        "--dist",
        str(session_dist),
        "--cache-dir",
        str(cache_root),
    ]
    done = vpr("release", *common, "--store", str(store), "--signing-key", str(key))
    out = session_dist / "reference"
    card = json.loads((out / "scorecard.json").read_text())
    # the CPU runner never certifies for the fleet, and nothing failed
    assert card["verdict"] == "pilot", card["summary"]
    assert set(card["checks"]) >= {
        "cadence",
        "isolation",
        "pinning",
        "scheduler",
        "api",
        "environment",
        "plugin_tests",
    }
    assert "verdict: pilot" in done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["conformance"]["verdict"] == "pilot"
    # the signed statement verifies against the key's public half, subjects included
    vpr("manifest", "verify", str(out / "manifest.json"), "--key", f"{key}.pub")
    index = json.loads((store / "index.json").read_text())
    assert manifest["pairing_id"] in json.dumps(index)
    # nothing changed: every stage reuses its result, and the manifest bytes stay the same
    before = (out / "manifest.json").read_bytes()
    again = vpr("release", *common, "--store", str(store), "--signing-key", str(key))
    assert "cached result reused" in again.stderr
    assert (out / "manifest.json").read_bytes() == before
    run = json.loads((out / "run.json").read_text())
    assert set(run["release"]["stages_seconds"]) == {
        "lock",
        "build-core",
        "build-plugin",
        "env",
        "conform",
        "manifest",
        "publish",
    }
