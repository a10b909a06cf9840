"""`vpr release` end to end on the reference pairing: every stage, a real loopback index."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.support import REFERENCE_SPEC, vpr


def test_release_reference_pairing(
    reference_env: dict, session_dist: Path, cache_root: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    key = tmp_path / "keys" / "release.key"
    vpr("keygen", "--out", str(key))
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
        "workload",
        "api",
        "environment",
        "plugin_tests",
    }
    assert "verdict: pilot" in done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["conformance"]["verdict"] == "pilot"
    # the request mix's features: the plugin's answers and the host sampler's share
    recorded = manifest["conformance"]["workload"]
    assert (
        recorded["paths"]["host sampler"]["share"]
        == card["workload"]["paths"]["host sampler"]["share"]
        > 0
    )
    assert {f["feature"]: f["outcome"] for f in recorded["features"]}["speculative"] == "refused"
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
        "build-guard",
        "env",
        "conform",
        "manifest",
        "publish",
        "ledger",
    }
    # each release appended its verdict to the store's signed ledger, read back verified
    entries = json.loads(
        vpr("manifest", "ledger", "--store", str(store), "--key", f"{key}.pub", "--json").stdout
    )
    assert [(e["seq"], e["kind"], e["verdict"]) for e in entries] == [
        (1, "release", "pilot"),
        (2, "release", "pilot"),
    ]
    assert entries[1]["core"]["version"] == manifest["core"]["version"]
    assert entries[1]["plugin"]["commit"] == manifest["plugin"]["commit"]
    assert entries[1]["manifest_sha256"] == hashlib.sha256(before).hexdigest()
    # the release lag, as the cadence check measured it, is in the ledger
    cadence = card["checks"]["cadence"]["details"]
    assert entries[1]["lag"] == {
        "days": cadence["lag_days"],
        "minor_releases": cadence["lag_minor"],
    }
    assert (
        run["publish"]["certified_at"] == index["pairings"][manifest["pairing_id"]]["certified_at"]
    )

    # what a newcomer reads: the verdict with why and what is next, the hardware part listed
    assert [d["check"] for d in card["deferred"]] == ["hardware"]
    assert card["explanation"]["next_level"] == "fleet"
    assert card["pairing_id"] == manifest["pairing_id"]
    page = (out / "scorecard.html").read_text()
    assert "Verdict: PILOT" in page and "data:image/png;base64," in page and "`" not in page


def test_install_reference_pairing_from_the_store_offline(
    reference_env: dict, session_dist: Path, cache_root: Path, tmp_path: Path
) -> None:
    """The released reference pairing installs from the store alone (its embedded index and
    uv's cache, no network) into a fresh venv; a second run changes nothing."""
    store, key = tmp_path / "store", tmp_path / "keys" / "release.key"
    vpr("keygen", "--out", str(key))
    common = ["--spec", str(REFERENCE_SPEC), "--dist", str(session_dist)]
    vpr("release", *common, "--cache-dir", str(cache_root), "--store", str(store),
        "--signing-key", str(key))  # fmt: skip
    pid = json.loads((session_dist / "reference" / "manifest.json").read_text())["pairing_id"]
    env = tmp_path / "venv"

    def install(env: Path, public: str) -> list[str]:
        return ["install", pid[:12], "--store", str(store), "--python-env", str(env),
                "--key", public, "--offline", "--cache-dir", str(cache_root), "--json"]  # fmt: skip

    first = json.loads(vpr(*install(env, f"{key}.pub")).stdout)
    assert first["status"] == "installed" and first["pins"] > 100
    second = json.loads(vpr(*install(env, f"{key}.pub")).stdout)
    assert second["status"] == "unchanged"
    stored = store / "pairings" / f"{pid}.json"
    python = str(env / "bin" / "python")
    ok = vpr("manifest", "check-env", "--manifest", str(stored), "--python", python,
             "--key", f"{key}.pub")  # fmt: skip
    assert "every pin of" in ok.stdout
    # a wrong key is refused before anything is installed
    other = tmp_path / "keys" / "other.key"
    vpr("keygen", "--out", str(other))
    wrong = vpr(*install(tmp_path / "never", f"{other}.pub"), check=False)
    assert wrong.returncode == 1 and "signature" in wrong.stderr
    assert not (tmp_path / "never").exists()
