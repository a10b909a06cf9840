"""The scorecard people read: verdict first with why and what is next, every deferred item,
the pairing's facts, the replay headline, folded evidence; deterministic bytes."""

from __future__ import annotations

import base64
import json

from tests.support import visible_text
from vllm_plugin_release.conform import CheckResult, Evidence, suite
from vllm_plugin_release.conform.scorecard import (
    evidence_groups,
    markdown,
    scorecard,
    to_html,
    value_text,
)

# A 1x1 PNG, so the page's embedding can be checked without drawing.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
FACTS = {
    "pairing_id": "0d2d" * 16,
    "wheels": [
        {
            "role": "core",
            "filename": "vllm-0.26.0+empty-cp311-cp311-linux_x86_64.whl",
            "sha256": "a" * 64,
        },
        {
            "role": "plugin",
            "filename": "vllm_reference_plugin-0.1.0-py3-none-any.whl",
            "sha256": "b" * 64,
        },
    ],
    "runtime": {"name": "reference-runtime", "status": "absent", "reason": "not installed"},
    "certified_on": "2026-12-01",
    "tool": {"name": "vllm-plugin-release", "version": "0.1.0"},
    "replay": {
        "ratios": {
            "itl_p50_s": 1.0,
            "itl_p99_s": 1.1705,
            "itl_max_s": 2.0909,
            "ttft_p99_s": 1.0701,
            "output_tokens_per_s": 0.9693,
        },
        "mixed_step_share": {"plugin": 0.0, "upstream": 0.186},
        "plots": ["replay-itl.png"],
    },
}
PAIRING = {"name": "reference", "core": "vllm 0.26.0", "plugin": "vllm-reference-plugin 0.1.0"}


def api_evidence(n: int) -> list[Evidence]:
    contract = "buildspec/contracts/vllm-0.25.1-openai.json"
    return [
        Evidence(
            note=f"[info] added-request-field Req.f{i} (via POST /v1/x): new optional field",
            file=contract,
            value={
                "breaking": False,
                "kind": "added-request-field",
                "location": f"Req.f{i}",
                "via": "POST /v1/x",
                "detail": "new optional field",
            },
        )
        for i in range(n)
    ]


def results(cadence: str = "warn") -> list[CheckResult]:
    return [
        CheckResult("api", "pass", "no breaking change; `17` additive", api_evidence(20)),
        CheckResult("cadence", cadence, "7 minor releases behind"),
        CheckResult("isolation", "pass", "no vendor symbol"),
    ]


def card(res: list[CheckResult] | None = None, **kw: object) -> dict:
    return scorecard(
        results() if res is None else res,
        runner="cpu",
        pairing=PAIRING,
        facts=FACTS,
        not_run=[("hardware", "runs only on the hardware runner")],
        **kw,  # type: ignore[arg-type]
    )


def test_pilot_says_why_and_what_fleet_needs_and_lists_hardware_as_deferred() -> None:
    c = card()
    assert c["verdict"] == "pilot"
    assert [d["check"] for d in c["deferred"]] == ["hardware"]
    assert "conform-hardware" in c["deferred"][0]["run_with"]
    x = c["explanation"]
    assert x["next_level"] == "fleet"
    assert any("hardware" in n and "conform-hardware" in n for n in x["needs"])
    assert any("cadence" in w for w in x["why"])  # a warning is named, not hidden


HW_PASS = CheckResult("hardware", "pass", "served -tp 2 on the device")
# (results, runner) -> verdict: fleet only on the hardware runner, with nothing deferred
# and the hardware check passed; each other row is one way short of it.
VERDICTS = {
    "all passed on the hardware runner": ([*results(), HW_PASS], "hardware", "fleet"),
    "one check deferred there": (
        [*results(), HW_PASS, CheckResult("plugin_tests", "deferred", "needs the device")],
        "hardware",
        "pilot",
    ),
    "hardware check deferred": (
        [*results(), CheckResult("hardware", "deferred", "runtime missing")],
        "hardware",
        "pilot",
    ),
    "hardware check only warned": (
        [*results(), CheckResult("hardware", "warn", "served, slower than the target")],
        "hardware",
        "pilot",
    ),
    "no hardware check": (results(), "hardware", "pilot"),
    "all passed on the cpu runner": ([*results(), HW_PASS], "cpu", "pilot"),
    "one failed": ([*results("fail"), HW_PASS], "hardware", "lab"),
    "nothing ran": ([], "hardware", "lab"),
}


def test_verdict_is_fleet_only_with_every_check_run_and_the_hardware_check_passed() -> None:
    """Each row a way to be one step short of fleet (a mutation that let any of them
    through, e.g. fleet with a deferred check, fails its row)."""
    got = {
        name: scorecard(res, runner=runner, pairing=PAIRING)["verdict"]
        for name, (res, runner, _) in VERDICTS.items()
    }
    assert got == {name: want for name, (_, _, want) in VERDICTS.items()}


def test_lab_names_the_failing_check_and_what_pilot_needs() -> None:
    c = card(results(cadence="fail"))
    assert c["verdict"] == "lab"
    assert c["explanation"]["next_level"] == "pilot"
    assert c["explanation"]["why"][0] == "failed: cadence"
    assert any(n.startswith("fix cadence") for n in c["explanation"]["needs"])


def test_deferred_result_and_never_run_check_are_both_listed_once() -> None:
    res = [*results(), CheckResult("hardware", "deferred", "runtime missing")]
    c = card(res)
    assert [d["check"] for d in c["deferred"]] == ["hardware"]  # once, from the result
    assert c["deferred"][0]["reason"] == "runtime missing"
    no_hw = scorecard(results(), runner="cpu", pairing=PAIRING)  # nothing said: none listed
    assert no_hw["deferred"] == []


def test_html_verdict_first_facts_embedded_plot_folded_evidence() -> None:
    page = to_html(card(), {"replay-itl.png": PNG})
    text = visible_text(page)
    assert text.index("Verdict: PILOT") < text.index("Wheels") < text.index("Checks")
    for fact in (
        "0d2d" * 16,
        "a" * 64,
        "vllm_reference_plugin-0.1.0-py3-none-any.whl",
        "reference-runtime: absent",
        "2026-12-01",
        "vllm-plugin-release 0.1.0",
        "ITL p99",
        "1.17x",
        "2.09x",
        "0.97x",
        "upstream 18.6%",
    ):
        assert fact in text, fact
    assert "data:image/png;base64," + base64.b64encode(PNG).decode() in page
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "`" not in page  # code spans became <code>
    assert "<code>17</code>" in page
    assert '<a href="manifest.json">manifest.json</a>' in page
    assert page.count("<details>") == 1  # only the check with evidence folds
    # the contract path is named once for its group, not on every line
    assert page.count("vllm-0.25.1-openai.json") == 1
    # no raw JSON blob repeating what the note already says
    assert "&quot;breaking&quot;" not in page and '"breaking"' not in page


def test_markdown_has_the_same_order_and_facts() -> None:
    md = markdown(card())
    assert md.index("## Verdict: PILOT") < md.index("## Wheels") < md.index("## Deferred")
    assert "| hardware |" in md and "![" in md and "replay-itl.png" in md
    assert "1.17x" in md and "b" * 64 in md


def test_rendering_is_deterministic() -> None:
    a, b = card(), card()
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert to_html(a, {"replay-itl.png": PNG}) == to_html(b, {"replay-itl.png": PNG})
    assert markdown(a) == markdown(b)


def test_value_shown_only_when_it_adds_to_the_note() -> None:
    assert value_text({"kind": "x", "via": "POST /y"}, "x via POST /y") == ""
    assert value_text("0.33.0", "latest core release") == "0.33.0"
    assert value_text("0.33.0", "latest core 0.33.0") == ""
    assert value_text({"a": 1, "b": "two"}, "note") == "a=1, b=two"
    long = value_text({"k": ["x" * 300]}, "note")
    assert len(long) < 200 and long.endswith("(scorecard.json)")
    groups = evidence_groups(
        [{"note": "f.sh:3 said", "file": "f.sh", "line": 3}, {"note": "n", "file": "f.sh"}]
    )
    assert groups == [("f.sh", [("line 3: said", ""), ("n", "")])]


def test_not_run_here_names_the_hardware_part() -> None:
    ((name, why),) = suite.not_run_here("cpu")
    assert name == "hardware" and "this run used the cpu runner" in why
    ((name, why),) = suite.not_run_here("hardware")
    assert name == "hardware" and "vpr hardware live" in why


def test_a_pairing_without_its_environment_is_lab_whatever_ran() -> None:
    """Env-free checks all passing, the rest deferred for a missing interpreter: lab, never
    pilot (without `blocked` the same results would be pilot), and the card says why."""
    results = [
        CheckResult("isolation", "pass", "no vendor symbol in core code"),
        CheckResult("pinning", "pass", "pinned"),
        CheckResult("api", "deferred", "needs the pairing environment: no CPython 3.10"),
    ]
    pairing = {"name": "tt", "core": "vllm 0.26.0", "plugin": "vllm-tt-plugin"}
    assert scorecard(results, runner="cpu", pairing=pairing)["verdict"] == "pilot"
    blocked = {"reason": "no CPython 3.10 interpreter", "hint": "uv python install 3.10"}
    card = scorecard(results, runner="cpu", pairing=pairing, blocked=blocked)
    assert card["verdict"] == "lab"
    assert card["blocked"] == blocked
    why = card["explanation"]["why"]
    assert why[0] == "no pairing environment here: no CPython 3.10 interpreter"
    assert "ran without it: isolation, pinning" in why
    assert card["explanation"]["needs"][0] == "uv python install 3.10"
    assert "api" in {d["check"] for d in card["deferred"]}
    assert "## Verdict: LAB" in markdown(card)
