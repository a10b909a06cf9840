"""nightly.json from the typed NightlyReport: the keys and order the dict had, and the text."""

from __future__ import annotations

import json
from typing import Any

from vllm_plugin_release.flows.nightly import CoreRef, NightlyReport, Since, render_text

CORE = CoreRef("https://git.example/vllm", "main", "c" * 40)


def _ran(status: str, **more: Any) -> NightlyReport:
    failing = ("t::a",) if status == "fail" else ()
    return NightlyReport(
        status,
        pairing="ref",
        core=CORE,
        plugin_commit="p" * 40,
        manifest="ref-nightly",
        failing=failing,
        errors={t: ("E boom",) for t in failing},
        **more,
    )


def _old(status: str) -> dict[str, object]:
    """What the dict-building code wrote before the outcome's keys."""
    failing = ["t::a"] if status == "fail" else []
    return {
        "status": status,
        "pairing": "ref",
        "core": {"url": CORE.url, "ref": "main", "commit": CORE.commit},
        "plugin_commit": "p" * 40,
        "manifest": "ref-nightly",
        "failing": failing,
        "errors": {t: ["E boom"] for t in failing},
    }


def test_the_report_writes_the_keys_it_always_had() -> None:
    passed = _ran("pass", last_known_good="store/lkg/ref.json")
    assert json.dumps(passed.to_json()) == json.dumps(
        {**_old("pass"), "last_known_good": "store/lkg/ref.json"}
    )
    since = Since("g" * 40, 2, ("a" * 12 + " one", "b" * 12 + " two"))
    failed = _ran("fail", since=since, bisect="vpr bisect ...")
    assert json.dumps(failed.to_json()) == json.dumps(
        {
            **_old("fail"),
            "since_last_known_good": {
                "last_known_good": "g" * 40,
                "commits": 2,
                "subjects": ["a" * 12 + " one", "b" * 12 + " two"],
            },
            "bisect": "vpr bisect ...",
        }
    )
    unknown = _ran("fail", since=Since(None))
    assert unknown.to_json()["since_last_known_good"] == {"last_known_good": None, "commits": None}
    assert "bisect" not in unknown.to_json()
    skipped = NightlyReport("skipped", reason="next run due in 3 h")
    assert skipped.to_json() == {"status": "skipped", "reason": "next run due in 3 h"}


def test_the_text_of_each_outcome() -> None:
    assert render_text(NightlyReport("skipped", reason="not due")) == "nightly: skipped (not due)"
    passed = render_text(_ran("pass", last_known_good="x"))
    assert passed.endswith(f"last-known-good core commit moved to {CORE.commit}")
    failed = render_text(_ran("fail", since=Since("g" * 40, 1, ("s",)), bisect="vpr bisect X"))
    assert failed.splitlines() == [
        f"nightly ref: fail on main {CORE.commit}",
        "1 plugin test(s) fail:",
        "  t::a",
        "      E boom",
        f"1 core commit(s) since the last-known-good {'g' * 12}:",
        "  s",
        "find the breaking commit: vpr bisect X",
    ]
