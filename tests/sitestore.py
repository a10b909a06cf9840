"""Manifest stores for the compatibility site, written as the store's writers write them
(without building anything): signed manifests and statements under their pairing ids, the
index rebuilt from them, a signed and chained ledger, a signed head over all of it. Shared
by the site's tests and its benchmark (`synthetic`: a store of 1,000 pairings)."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
from dataclasses import replace
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


# ---------------------------------------------------------------------------
# The version matrix's column records, as `vpr matrix run --only` jobs leave them, recorded
# in a store's ledger by the real `vpr matrix assemble --store`.

PLUGIN = {"name": "vllm-reference-plugin", "version": "0.1.0", "commit": "a" * 40}
BREAKING = "keyword:vllm.v1.worker.block_table.MultiGroupBlockTable.__init__:max_model_len"
NOT_RUN_REASON = "vllm-0.27.1.tar.gz: connection reset <b>by</b> the index"


def matrix_columns(plugin: dict[str, str] | None = None) -> list[Any]:
    """Three columns: 0.25.1 passes, 0.26.0 (pinned) regresses with two breaking coupling
    changes, 0.27.1 could not be fetched (exit 3; its reason holds markup)."""
    from vllm_plugin_release.core import columns as cols

    plugin = plugin or PLUGIN
    python = cols.PythonChoice("3.11", "the spec's Python; vllm accepts it")
    counts = {"passed": 2, "failed": 0, "error": 0, "skipped": 0, "deferred": 1}
    changes = [
        {"id": BREAKING, "kind": "keyword", "symbol": BREAKING.split(":")[1],
         "detail": "no longer takes max_model_len", "uses": ["plugin/input_batch.py:237"]},
        {"id": "removed:vllm.old_api", "kind": "removed", "symbol": "vllm.old_api",
         "detail": "gone", "uses": ["plugin/x.py:3"]},
    ]  # fmt: skip
    good = cols.Column(
        "0.25.1", "release", "k1", "3.11", python.why, "tested", 0, modules=4, counts=counts,
        outcomes={"t::a": "passed", "t::b": "passed"}, plugin=plugin,
    )  # fmt: skip
    bad = cols.Column(
        "0.26.0", "pinned", "k2", "3.11", python.why, "tested", 0, modules=4,
        counts={**counts, "passed": 1, "failed": 1},
        outcomes={"t::a": "failed", "t::b": "passed"},
        errors={"t::a": ("TypeError: unexpected keyword argument 'max_model_len'",)},
        coupling=cols.Coupling({"against": "0.25.1", "changes": changes}), plugin=plugin,
    )  # fmt: skip
    lost = cols.not_run("0.27.1", "release", "k3", python, 3, NOT_RUN_REASON)
    return [good, bad, replace(lost, plugin=plugin)]


def write_bisect(dist: Path, good: str = "v0.25.1", bad: str = "v0.26.0") -> None:
    """dist/bisect.json: a git bisection of the pinned column's step."""
    from vllm_plugin_release.core import bisect as bs
    from vllm_plugin_release.core.cache import write_json

    report = bs.BisectReport(
        "git", "https://github.com/vllm-project/vllm", "vllm", good, bad, 40, ("t::a",),
        (bs.BisectStep("c" * 40, "good"),), "d" * 40,
        bs.FirstBad("e" * 40, "[Core] Pass max_num_blocks to the block table", ("t::a",),
                    {"t::a": ("TypeError",)}),
    )  # fmt: skip
    dist.mkdir(parents=True, exist_ok=True)
    write_json(dist / "bisect.json", report.to_json())


def record_matrix(
    root: Path, store: Path, columns: list[Any], *, bisect: bool = True, env: dict | None = None
):
    """Each column's record in dist/ref/matrix/ (as the CI jobs' artifacts are put there),
    then `vpr matrix assemble --store` (the real CLI, signing with root/.vpr's key)."""
    from tests.pairing import vpr, write_spec
    from vllm_plugin_release.core import columns as cols

    spec = root / "buildspec" / "ref.toml"
    if not spec.exists():
        write_spec(root)
    dist = root / "dist" / "ref"
    for column in columns:
        cols.write_column(dist / cols.FOLDER, column)
    if bisect:
        write_bisect(dist)
    return vpr("matrix", "assemble", "--spec", str(spec), "--store", str(store), cwd=root,
               env=env)  # fmt: skip
