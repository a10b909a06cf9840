"""The version matrix's records: regressions column by column, matrix.json's exact keys."""

from __future__ import annotations

import json

from vllm_plugin_release.flows.matrix import Column, Matrix, render_markdown, with_regressions


def _column(core: str, role: str, outcomes: dict[str, str]) -> Column:
    failing = tuple(sorted(t for t, o in outcomes.items() if o == "failed"))
    return Column(
        core=core,
        role=role,
        counts={"passed": 1, "failed": len(failing), "error": 0, "skipped": 0},
        outcomes=dict(sorted(outcomes.items())),
        failing=failing,
        errors={t: ("AssertionError: boom",) for t in failing},
    )


def test_regressions_and_the_bytes_of_matrix_json() -> None:
    columns = with_regressions(
        [
            _column("0.9.0", "release", {"t::a": "passed", "t::b": "passed"}),
            _column("0.10.0", "pinned", {"t::a": "failed", "t::b": "passed"}),
        ]
    )
    m = Matrix("ref", "vllm", "https://pypi.org/simple", columns)
    assert [c.role for c in m.columns] == ["lowest", "pinned"] and m.regressed
    # what the dict-building code wrote, key for key and in this order
    old = {
        "pairing": "ref",
        "core": "vllm",
        "index": "https://pypi.org/simple",
        "columns": [
            {
                "core": "0.9.0",
                "role": "lowest",
                "counts": {"passed": 1, "failed": 0, "error": 0, "skipped": 0},
                "outcomes": {"t::a": "passed", "t::b": "passed"},
                "failing": [],
                "errors": {},
                "regressions": [],
            },
            {
                "core": "0.10.0",
                "role": "pinned",
                "counts": {"passed": 1, "failed": 1, "error": 0, "skipped": 0},
                "outcomes": {"t::a": "failed", "t::b": "passed"},
                "failing": ["t::a"],
                "errors": {"t::a": ["AssertionError: boom"]},
                "regressions": ["t::a"],
            },
        ],
    }
    assert json.dumps(m.to_json(), indent=2) == json.dumps(old, indent=2)
    text = render_markdown(m)
    assert "| 0.10.0 | pinned | 1 | 1 | **REGRESSED: 1** |" in text
    assert text.endswith("Regressed on 0.10.0:\n- `t::a` AssertionError: boom\n")
    alone = Matrix("ref", "vllm", "i", with_regressions([_column("0.9.0", "pinned", {})]))
    assert not alone.regressed and alone.to_json()["columns"][0]["regressions"] == []
