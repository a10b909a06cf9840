"""Manifest stores for the compatibility site, written as the store's writers write them
(without building anything): signed manifests and statements under their pairing ids, the
index rebuilt from them, a signed and chained ledger, a signed head over all of it. Shared
by the site's tests and its benchmark (`synthetic`: a store of 1,000 pairings)."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
from pathlib import Path
from typing import Any

from tests.pairing import built_manifest, manifest_variant, sign_store, typed
from vllm_plugin_release.core import attest, ledger
from vllm_plugin_release.core import manifestdoc as doc
from vllm_plugin_release.core import storeindex as si
from vllm_plugin_release.core.cache import key_of

CADENCE = "plugin targets core {core}; policy allows 1 [lag {minor} minor, {days} days]"


def variant(
    base: dict[str, Any],
    *,
    core: str,
    plugin: str,
    commit: str,
    verdict: str = "pilot",
    python: str = "3.11.7",
    lag_days: int = 10,
    approval: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A manifest of another pairing (its id recomputed), verdict on the cpu runner."""
    m = copy.deepcopy(base)
    m["plugin"]["name"] = plugin
    m["core"]["python"] = python
    m["conformance"]["runner"] = "cpu"
    m["conformance"]["checks"]["cadence"]["summary"] = CADENCE.format(
        core=core, minor=lag_days // 30, days=lag_days
    )
    m["api_approval"] = approval
    out = manifest_variant(m, commit=commit, core=core, verdict=verdict)
    out["pairing_inputs"]["python"] = ".".join(python.split(".")[:2])
    out["pairing_id"] = key_of(out["pairing_inputs"])
    return out


def write_store(
    root: Path,
    manifests: list[dict[str, Any]],
    key: Any,
    hardware: dict[str, str] | None = None,
) -> Path:
    """A signed store of `manifests` in `root`; the ledger holds each one's cpu verdict and,
    for the pairing ids in `hardware`, a hardware verdict after it."""
    store = root
    (store / si.PAIRINGS).mkdir(parents=True, exist_ok=True)
    found: list[tuple[str, bytes, bool]] = []
    lines: list[bytes] = []
    day = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    for n, m in enumerate(manifests):
        data = doc.manifest_bytes(m)
        digest = hashlib.sha256(data).hexdigest()
        pid = m["pairing_id"]
        statement = attest.build_statement(m, digest, {}, builder_id=attest.LOCAL_BUILDER)
        (store / si.PAIRINGS / f"{pid}.json").write_bytes(data)
        (store / si.PAIRINGS / f"{pid}.intoto.jsonl").write_bytes(
            attest.signed_bytes(statement, key)
        )
        found.append((pid, data, True))
        lag = ledger.Lag(int(m["conformance"]["checks"]["cadence"]["summary"].split()[-2]), 1)
        when = (day + dt.timedelta(minutes=n)).strftime("%Y-%m-%dT%H:%M:%SZ")
        verdicts = [("cpu", m["conformance"]["verdict"])]
        if hardware and pid in hardware:
            verdicts.append(("hardware", hardware[pid]))
        for runner, verdict in verdicts:
            entry = ledger.entry_from_manifest(
                typed({**m, "conformance": {**m["conformance"], "verdict": verdict}}),
                manifest_sha256=digest, runner=runner, time=when, lag=lag,
            )  # fmt: skip
            entry = ledger.chained(entry, lines[-1] if lines else None, len(lines))
            lines.append(ledger.sign_line(entry, key))
    index = si.rebuild_index(found, si.empty_index(), lambda pid: si.EntryExtras())
    (store / si.INDEX_FILE).write_bytes(si.index_bytes(index))
    (store / "ledger").mkdir(exist_ok=True)
    (store / ledger.LEDGER_FILE).write_bytes(b"".join(lines))
    sign_store(store, key)
    return store


def small(root: Path, key: Any) -> tuple[Path, list[dict[str, Any]]]:
    """Three pairings over two cores: a pilot on 0.26.0, the same plugin's fleet on 0.25.1
    (hardware run in the ledger) with an approved API change, and another plugin's lab."""
    base = built_manifest(root / "dist")
    approval = {"from": "0.25.0", "to": "0.25.1", "by": "Rel Eng <releng@example.org>",
                "why": "the plugin follows the renamed keyword",
                "changes": ["signature:vllm.v1.core.sched.Scheduler.schedule"]}  # fmt: skip
    manifests = [
        variant(base, core="0.26.0", plugin="vllm-reference-plugin", commit="a" * 40,
                lag_days=113),
        variant(base, core="0.25.1", plugin="vllm-reference-plugin", commit="b" * 40,
                verdict="pilot", lag_days=40, approval=approval),
        variant(base, core="0.19.0", plugin="vllm-spyre", commit="c" * 40, verdict="lab",
                lag_days=218),
    ]  # fmt: skip
    hardware = {manifests[1]["pairing_id"]: "fleet"}
    return write_store(root / "store", manifests, key, hardware), manifests


def synthetic(root: Path, key: Any, n: int = 1000, plugins: int = 10) -> Path:
    """`n` pairings: n / plugins / 2 core versions x `plugins` plugins x two Pythons, every
    tenth with a hardware verdict in the ledger."""
    base = built_manifest(root / "dist")
    manifests, hardware = [], {}
    for i in range(n):
        core = f"0.{i // (plugins * 2)}.0"
        m = variant(base, core=core, plugin=f"vllm-vendor-plugin-{i % plugins}",
                    commit=f"{i % plugins:040x}", python=f"3.{10 + (i // plugins) % 2}.0",
                    verdict=("pilot", "lab")[i % 3 == 0], lag_days=i % 300)  # fmt: skip
        manifests.append(m)
        if i % 10 == 0:
            hardware[m["pairing_id"]] = "fleet" if m["conformance"]["verdict"] == "pilot" else "lab"
    return write_store(root / "store", manifests, key, hardware)
