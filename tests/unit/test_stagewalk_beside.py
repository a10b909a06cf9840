"""flows/stagewalk: line stages side by side (`Graph.steps`). Two independent line stages
really overlap (a barrier both must pass), a stage needing another never starts early,
the first failure stops the others and ends their child processes, Ctrl-C ends every
child the step started, `Halt` ends the walk after its step, and whatever order they
end in, the record and the rules keep the line's order. The drawings show the steps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from vllm_plugin_release.core import progress, stagegraph
from vllm_plugin_release.core.stagegraph import Graph, Stage
from vllm_plugin_release.edges import proc
from vllm_plugin_release.flows.stagewalk import Halt, Walk, walk


def _noop() -> None:
    pass


def _names(steps: list[list[Stage]]) -> list[list[str]]:
    return [[s.name for s in step] for step in steps]


def test_steps_group_consecutive_independent_stages_up_to_the_width() -> None:
    g = Graph(
        [
            Stage("core", _noop),
            Stage("warm", _noop, ("core",), ahead=True),
            Stage("plugin", _noop, ("core",)),
            Stage("guard", _noop, ("core",)),
            Stage("docs", _noop, ("core",)),
            Stage("uses-warm", _noop, ("warm",)),  # warm waits on core: not beside it
            Stage("env", _noop, ("plugin", "guard")),
            Stage("other", _noop),
        ]
    )
    assert _names(g.steps()) == [
        ["core"], ["plugin", "guard", "docs", "uses-warm"], ["env", "other"],
    ]  # fmt: skip
    assert _names(g.steps(width=2)) == [
        ["core"], ["plugin", "guard"], ["docs", "uses-warm"], ["env", "other"],
    ]  # fmt: skip
    assert _names(g.steps(width=1)) == [[s.name] for s in g.line()]
    chain = Graph([Stage("a", _noop), Stage("b", _noop, ("a",)), Stage("c", _noop, ("b",))])
    assert _names(chain.steps()) == [["a"], ["b"], ["c"]]
    # an ahead stage needing a stage of the step keeps its user out of it
    late = Graph(
        [Stage("a", _noop), Stage("w", _noop, ("a",), ahead=True), Stage("b", _noop, ("w",))]
    )
    assert _names(late.steps()) == [["a"], ["b"]]


def test_the_drawings_show_which_line_stages_may_run_side_by_side() -> None:
    g = Graph(
        [
            Stage("core", _noop),
            Stage("plugin", _noop, ("core",)),
            Stage("guard", _noop, ("core",), about="small"),
            Stage("env", _noop, ("plugin", "guard")),
        ]
    )
    assert stagegraph.text(g).splitlines() == [
        " 1. core",
        " 2. plugin  <- core",
        " 3. guard  <- core  || beside plugin  (small)",
        " 4. env  <- plugin, guard",
    ]
    dot = stagegraph.dot(g)
    assert (
        'subgraph cluster_step1 { label="side by side"; style=dotted; "plugin"; "guard"; }' in dot
    )
    assert dot.count("subgraph") == 1  # a step of one stage is no cluster


def test_two_independent_line_stages_really_run_side_by_side() -> None:
    """Each waits at a barrier for the other: only a walk running both at once passes."""
    barrier = threading.Barrier(2, timeout=30)
    g = Graph([Stage("a", barrier.wait), Stage("b", barrier.wait), Stage("c", _noop, ("a", "b"))])
    record = walk(g, width=2)
    assert record.failed is None and list(record.seconds) == ["a", "b", "c"]
    assert not barrier.broken


def test_one_at_a_time_when_the_width_is_one_and_a_need_is_never_started_early() -> None:
    """The mutation of the test above: with width 1, or b needing a, b cannot start while
    a waits for it, so a's barrier breaks (after its timeout) and the walk fails at a."""
    for g, width in (
        (Graph([Stage("a", threading.Barrier(2, timeout=0.5).wait), Stage("b", _noop)]), 1),
        (Graph([Stage("a", threading.Barrier(2, timeout=0.5).wait), Stage("b", _noop, ("a",))]), 2),
    ):
        record = Walk()
        with pytest.raises(threading.BrokenBarrierError):
            walk(g, record=record, width=width)
        assert record.failed == "a" and "b" not in record.seconds


def test_the_record_and_the_rules_keep_the_line_order_whichever_ends_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """b ends first (a waits for it), yet the record, the rules and the numbers are a, b."""
    b_done = threading.Event()
    ended: list[str] = []

    def a() -> None:
        assert b_done.wait(30)
        progress.info("a's line")
        ended.append("a")

    def b() -> None:
        progress.info("b's line")
        ended.append("b")
        b_done.set()

    g = Graph([Stage("a", a), Stage("b", b), Stage("c", lambda: ended.append("c"), ("a", "b"))])
    saved = dict(progress._mode)
    progress.configure(interactive=False)
    try:
        record = walk(g, width=2)
    finally:
        progress._mode.update(saved)
    err = capsys.readouterr().err
    assert ended == ["b", "a", "c"] and list(record.seconds) == ["a", "b", "c"]
    assert err.index("stage 1/3: a (beside b)") < err.index("stage 2/3: b (beside a)")
    assert err.index("stage 2/3: b (beside a)") < err.index("stage 3/3: c")
    assert "vpr [a] a's line" in err and "vpr [b] b's line" in err  # tagged by stage
    assert "vpr b: ended after" in err and "vpr a: ended after" in err
    assert "vpr [c]" not in err  # a stage alone in its step prints as before


def _sleeper(tmp_path: Path, name: str) -> subprocess.Popen[bytes]:
    """A registered child (as the edges start one) that runs until it is stopped."""
    log = (tmp_path / f"{name}.log").open("wb")
    return proc.spawn([sys.executable, "-c", "import time; time.sleep(120)"], what=name, stdout=log)


def test_a_failure_beside_another_stops_it_and_ends_its_child(tmp_path: Path) -> None:
    started = threading.Event()
    kids: list[subprocess.Popen[bytes]] = []
    ran: list[str] = []

    def long() -> None:
        kids.append(_sleeper(tmp_path, "long"))
        started.set()
        code = kids[0].wait()
        raise RuntimeError(f"long's child ended with {code}")  # dropped: b failed first

    def broken() -> None:
        assert started.wait(30)
        raise ValueError("b broke")

    g = Graph([Stage("long", long), Stage("b", broken), Stage("c", lambda: ran.append("c"))])
    record = Walk()
    with pytest.raises(ValueError, match="b broke"):
        walk(g, record=record, width=2)
    assert record.failed == "b" and record.stopped == ["long"]
    assert kids[0].poll() not in (None, 0)  # the child beside it was ended, not let run out
    assert list(record.seconds) == ["long", "b"] and ran == []


def test_a_stop_hook_stops_a_stage_beside_a_failed_one_that_starts_no_child() -> None:
    stop = threading.Event()

    def waits() -> None:
        stop.wait(60)

    def broken() -> None:
        raise OSError("gone")

    g = Graph([Stage("waits", waits), Stage("b", broken)])
    record = Walk()
    with pytest.raises(OSError, match="gone"):
        walk(g, record=record, stop={"waits": stop.set}, width=2)
    assert stop.is_set() and record.failed == "b" and record.stopped == ["waits"]


def test_halt_beside_another_lets_it_end_and_runs_nothing_after_the_step() -> None:
    ran: list[str] = []

    def gate() -> None:
        raise Halt

    g = Graph(
        [
            Stage("gate", gate),
            Stage("side", lambda: ran.append("side")),
            Stage("after", lambda: ran.append("after"), ("gate",)),
        ]
    )
    record = walk(g, width=2)
    assert record.halted == "gate" and record.failed is None
    assert ran == ["side"] and list(record.seconds) == ["gate", "side"]


def test_ctrl_c_during_a_step_ends_every_child_it_started(tmp_path: Path) -> None:
    """SIGINT while two stages run side by side, each with a child: the CLI's handler
    ends the children and the walk ends with `Interrupted`, its threads joined."""
    kids: list[subprocess.Popen[bytes]] = []
    both = threading.Barrier(3, timeout=30)

    def with_child(name: str):
        def run() -> None:
            kids.append(_sleeper(tmp_path, name))
            both.wait()
            kids[-1].wait()

        return run

    def interrupt() -> None:
        both.wait()
        os.kill(os.getpid(), signal.SIGINT)

    g = Graph([Stage("x", with_child("x")), Stage("y", with_child("y")), Stage("z", interrupt)])
    record = Walk()
    with pytest.raises(proc.Interrupted), proc.stopped_on_signals():
        walk(g, record=record, width=3)
    assert len(kids) == 2 and all(k.poll() not in (None, 0) for k in kids)
    assert record.failed in {"x", "y", "z"} and set(record.seconds) == {"x", "y", "z"}


def test_ctrl_c_while_the_step_starts_its_threads_is_recorded_and_ends_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Ctrl-C lands right after the last stage's thread started, before the step waits
    for them (CI hit that window under load): the walk still names the step's stage,
    times every stage and ends the children. Made certain here: that thread's `start`
    raises KeyboardInterrupt once the thread runs."""
    from vllm_plugin_release.flows import stagewalk

    kids: list[subprocess.Popen[bytes]] = []
    both = threading.Barrier(2, timeout=30)

    def with_child(name: str):
        def run() -> None:
            kids.append(_sleeper(tmp_path, name))
            both.wait()
            kids[-1].wait()

        return run

    made = stagewalk._beside_thread

    def interrupted_start(stage: Stage, waits: list[threading.Thread], done: object):
        thread = made(stage, waits, done)
        if stage.name == "y":
            real = thread.start

            def start() -> None:
                real()
                raise KeyboardInterrupt

            thread.start = start  # type: ignore[method-assign]
        return thread

    monkeypatch.setattr(stagewalk, "_beside_thread", interrupted_start)
    g = Graph([Stage("x", with_child("x")), Stage("y", with_child("y"))])
    record = Walk()
    with pytest.raises(KeyboardInterrupt):
        walk(g, record=record, width=2)
    assert len(kids) == 2 and all(k.poll() not in (None, 0) for k in kids)
    assert record.failed in {"x", "y"} and set(record.seconds) == {"x", "y"}


def test_children_stop_since_ends_only_the_newer_ones(tmp_path: Path) -> None:
    old = _sleeper(tmp_path, "old")
    try:
        since = proc.mark()
        new = _sleeper(tmp_path, "new")
        assert proc.stop_since(since) == 1
        assert new.poll() is not None and old.poll() is None
    finally:
        proc.stop_since(since - 1)
    assert old.poll() is not None
