"""The version matrix's records (core/columns): the Python a column takes, a column record read
back as hostile input, regressions against the tested column before, the coupling's
accuracy, and the bytes of matrix.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_plugin_release.core import columns as cols
from vllm_plugin_release.core.errors import BadInput


def _column(core: str, outcomes: dict[str, str], **kw) -> cols.Column:
    failing = [t for t, o in outcomes.items() if o == "failed"]
    return cols.Column(
        core=core,
        role=kw.pop("role", "release"),
        key="k",
        python="3.10",
        python_why="the spec's Python",
        status=kw.pop("status", "tested"),
        exit_class=kw.pop("exit_class", 0),
        counts={"passed": 1, "failed": len(failing), "error": 0, "skipped": 0, "deferred": 0},
        outcomes=outcomes,
        errors={t: ("AttributeError: 'Cfg' object has no attribute 'lanes'",) for t in failing},
        **kw,
    )


@pytest.mark.parametrize(
    ("requires", "expected"),
    [
        (">=3.10,<3.15", "3.10"),  # the spec's own while the core accepts it
        (">=3.11,<3.15", "3.12"),  # the floor moved past it: the newest the runtime has
        (None, "3.10"),
        (">=3.13", None),  # nothing fits: said, not guessed
        ("not a specifier", None),
    ],
)
def test_the_python_follows_the_core(requires: str | None, expected: str | None) -> None:
    choice = cols.choose_python(requires, "3.10", ["3.10", "3.12"], "vllm 0.32.0")
    assert choice.python == expected
    assert "vllm 0.32.0" in choice.why


def test_a_column_record_round_trips_and_a_hostile_one_is_refused(tmp_path: Path) -> None:
    col = _column("0.26.0", {"t::a": "passed"}, imports={"p.launcher": "ImportError: x"})
    path = cols.write_column(tmp_path, col)
    assert path.name == "0.26.0.json"
    assert cols.read_column(path) == col
    data = json.loads(path.read_text())
    for key, value in [("status", "done"), ("counts", {"passed": "1"}), ("core", "0.25.1")]:
        path.write_text(json.dumps({**data, key: value}))
        with pytest.raises(BadInput, match=r"0\.26\.0\.json: not a column record"):
            cols.read_column(path)
    path.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(BadInput, match="not a column record"):
        cols.read_column(path)
    with pytest.raises(BadInput, match="not a core version"):
        cols.record_path(tmp_path, "../../etc/passwd")
    assert cols.read_column(tmp_path / "0.27.0.json") is None


def test_regressions_skip_a_column_not_run_and_count_imports() -> None:
    a = _column("0.25.1", {"t::a": "passed", "t::b": "passed"})
    b = _column("0.26.0", {}, status="not-run", exit_class=3)
    c = _column("0.27.0", {"t::a": "failed", "t::b": "passed"}, imports={"p.x": "ImportError"})
    out = cols.assemble([a, b, c])
    assert [x.role for x in out] == ["lowest", "release", "release"]
    assert out[1].against is None and out[1].regressions == ()
    assert out[2].against == "0.25.1" and out[2].regressions == ("t::a",)
    assert out[2].import_regressions == ("p.x",)
    m = cols.Matrix("tt", "vllm", "idx", tuple(out))
    assert m.regressed
    # without a tracer every observed failure is a miss
    assert m.accuracy().recall == 0.0 and m.accuracy().observed == 2


def test_accuracy_counts_what_the_tracer_explains() -> None:
    change = {"id": "attribute:vllm.Cfg.lanes", "kind": "attribute", "detail": "gone"}
    other = {"id": "removed:vllm.old", "kind": "removed", "detail": "gone"}
    a = _column("0.25.1", {"t::a": "passed"})
    b = _column(
        "0.26.0",
        {"t::a": "failed"},
        imports={"p.launcher": "ImportError: cannot import name 'X'"},
        # the tracer's answer when the column ran: every failing test and module
        coupling=cols.Coupling(
            {
                "against": "0.25.1",
                "changes": [change, other],
                "traced": {"t::a": ["attribute:vllm.Cfg.lanes"], "t::never": ["removed:vllm.old"]},
            }
        ),
    )
    m = cols.Matrix("tt", "vllm", "idx", tuple(cols.assemble([a, b])))
    acc = m.accuracy()
    assert (acc.observed, acc.traced, acc.breaking, acc.confirmed) == (2, 1, 2, 1)
    assert acc.recall == 0.5 and acc.precision == 0.5
    assert acc.missed == ("0.26.0: import p.launcher",)
    md = cols.render_markdown(m)
    assert "recall 50% (1 of 2 observed failures traced" in md
    assert "- `attribute:vllm.Cfg.lanes` (confirmed): gone" in md


def test_matrix_json_bytes_depend_on_the_records_only() -> None:
    a = _column("0.25.1", {"t::a": "passed"})
    b = _column("0.26.0", {"t::a": "failed"}, role="pinned")
    one = cols.render_json(cols.Matrix("tt", "vllm", "idx", tuple(cols.assemble([a, b]))))
    two = cols.render_json(cols.Matrix("tt", "vllm", "idx", tuple(cols.assemble([a, b]))))
    assert one == two
    data = json.loads(one)
    assert list(data) == ["pairing", "core", "index", "accuracy", "columns"]
    assert "key" not in data["columns"][0] and data["columns"][1]["regressions"] == ["t::a"]
