"""core/stagegraph and flows/stagewalk: a flow as a graph of stages. What is refused when
declared, what a target needs, the walk's order, ahead work (started by its edge, joined
before the stage needing it, stopped when the walk ends without it, its failure never
the flow's), and that a toy stage is one graph entry which the release's walk runs
where its edges place it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from vllm_plugin_release.core import stagegraph
from vllm_plugin_release.core.stagegraph import Graph, Stage
from vllm_plugin_release.flows.stagewalk import Walk, walk


def _noop() -> None:
    pass


def test_a_graph_refuses_names_twice_unknown_needs_and_a_misorder() -> None:
    with pytest.raises(ValueError, match="'a' is declared twice"):
        Graph([Stage("a", _noop), Stage("a", _noop)])
    with pytest.raises(ValueError, match="needs 'x', unknown"):
        Graph([Stage("a", _noop, ("x",))])
    with pytest.raises(ValueError, match="needs 'b', declared later"):  # a cycle lands here
        Graph([Stage("a", _noop, ("b",)), Stage("b", _noop, ("a",))])
    with pytest.raises(ValueError, match="ahead stage 'b' needs ahead stage 'a'"):
        Graph([Stage("a", _noop, ahead=True), Stage("b", _noop, ("a",), ahead=True)])


def test_a_target_takes_what_it_needs_in_the_declared_order() -> None:
    g = Graph(
        [
            Stage("fetch", _noop),
            Stage("warm", _noop, ahead=True),
            Stage("build", _noop, ("fetch", "warm")),
            Stage("docs", _noop, ("fetch",)),
            Stage("test", _noop, ("build",)),
        ]
    )
    assert [s.name for s in g.needed(["test"])] == ["fetch", "warm", "build", "test"]
    assert [s.name for s in g.line(["test"])] == ["fetch", "build", "test"]
    assert [s.name for s in g.needed(["docs"])] == ["fetch", "docs"]
    assert [s.name for s in g.needed()] == ["fetch", "warm", "build", "docs", "test"]
    with pytest.raises(ValueError, match="no stage 'nope'"):
        g.needed(["nope"])


def test_the_drawings_show_the_line_its_needs_and_the_ahead_work() -> None:
    g = Graph(
        [
            Stage("warm", _noop, ahead=True, about="early"),
            Stage("a", _noop),
            Stage("b", _noop, ("a", "warm")),
            Stage("late", _noop, ("a",), ahead=True),
            Stage("c", _noop, ("b", "late")),
        ]
    )
    assert stagegraph.text(g).splitlines() == [
        "    ~ warm: ahead, from the start  (early)",
        " 1. a",
        "    ~ late: ahead, once a ended",
        " 2. b  <- a, warm",
        " 3. c  <- b, late",
    ]
    dot = stagegraph.dot(g, name="toy")
    assert dot.startswith('digraph "toy" {') and dot.endswith("}\n")
    assert '"warm" [style=dashed, label="warm (ahead)"];' in dot
    assert '"late" -> "c";' in dot and '"a" -> "b";' in dot


def test_the_drawings_show_each_stage_s_cache_state_and_a_failing_probe_is_unknown() -> None:
    def broken() -> str:
        raise OSError('disk "gone"\nsecond line')

    g = Graph(
        [
            Stage("warm", _noop, ahead=True, cached=lambda: stagegraph.CACHED),
            Stage("a", _noop, cached=lambda: stagegraph.NOT_CACHED),
            Stage("b", _noop, ("a",), cached=broken),
            Stage("c", _noop, ("b",), cached=lambda: None),  # nothing to say
            Stage("d", _noop, ("c",)),  # no probe
            Stage("e", _noop, ("d",), cached=lambda: 3),  # type: ignore[arg-type,return-value]
        ]
    )
    states = stagegraph.cache_states(g)
    assert states == {
        "warm": "cached",
        "a": "not cached",
        "b": 'unknown: disk "gone"',
        "e": "unknown: the probe answered 3",
    }
    assert stagegraph.cache_states(g, ["a"]) == {"a": "not cached"}  # only what is drawn
    assert stagegraph.text(g, states=states).splitlines() == [
        "    ~ warm [cached]: ahead, from the start",
        " 1. a [not cached]",
        ' 2. b [unknown: disk "gone"]  <- a',
        " 3. c  <- b",
        " 4. d  <- c",
        " 5. e [unknown: the probe answered 3]  <- d",
    ]
    assert stagegraph.text(g) == stagegraph.text(g, states={})  # no states: as before
    dot = stagegraph.dot(g, states=states)
    assert (
        '"warm" [style="dashed,filled", label="warm (ahead)\\ncached", fillcolor=palegreen];' in dot
    )
    assert '"a" [label="a\\nnot cached"];' in dot
    assert '"b" [label="b\\nunknown: disk \\"gone\\""];' in dot  # quotes escaped
    assert '  "d";' in dot and dot.count("filled") == 1  # only what is cached is filled


def test_the_walk_runs_the_line_in_order_and_ahead_work_once_its_needs_ended() -> None:
    seen: list[str] = []
    gate = threading.Event()

    def ahead() -> None:
        seen.append("ahead starts")
        gate.wait(5)
        seen.append("ahead ends")

    def step(name: str):
        return lambda: seen.append(name)

    g = Graph(
        [
            Stage("a", step("a")),
            Stage("warm", ahead, ("a",), ahead=True),
            # b needs a, so it runs beside the ahead work, not beside a (that is steps')
            Stage("b", lambda: (seen.append("b"), gate.set()), ("a",)),
            Stage("c", step("c"), ("b", "warm")),
        ]
    )
    done = walk(g)
    # warm starts after a; b runs beside it; c waits for warm to end
    assert seen.index("ahead starts") > seen.index("a")
    assert seen.index("c") > seen.index("ahead ends") > seen.index("b")
    assert list(done.seconds) == ["a", "b", "c"] and done.failed is None
    assert done.ahead_started == ["warm"]


def test_a_failing_stage_ends_the_walk_and_ahead_work_still_running_is_stopped() -> None:
    stop = threading.Event()
    ran: list[str] = []

    def fail() -> None:
        raise RuntimeError("boom")

    g = Graph(
        [
            Stage("warm", lambda: stop.wait(30), ahead=True),
            Stage("a", fail),
            Stage("b", lambda: ran.append("b"), ("a", "warm")),
        ]
    )
    record = Walk()
    with pytest.raises(RuntimeError, match="boom"):
        walk(g, record=record, stop={"warm": stop.set})
    assert record.failed == "a" and "a" in record.seconds
    assert ran == [] and stop.is_set()  # stopped, not waited for 30 s


def test_ahead_work_that_fails_is_not_the_flows_failure() -> None:
    ran: list[str] = []

    def broken() -> None:
        raise OSError("the installer failed")

    g = Graph([Stage("warm", broken, ahead=True), Stage("a", lambda: ran.append("a"), ("warm",))])
    assert walk(g).failed is None and ran == ["a"]


def test_halt_ends_the_walk_early_and_is_not_a_failure() -> None:
    """A gate (hardware: verdict lab) ends the walk: what follows does not run."""
    from vllm_plugin_release.flows.stagewalk import Halt

    stop = threading.Event()
    ran: list[str] = []

    def gate() -> None:
        ran.append("gate")
        raise Halt

    g = Graph(
        [
            Stage("warm", lambda: stop.wait(30), ahead=True),
            Stage("gate", gate),
            Stage("live", lambda: ran.append("live"), ("gate", "warm")),
        ]
    )
    record = walk(g, stop={"warm": stop.set})
    assert ran == ["gate"] and record.halted == "gate" and record.failed is None
    assert list(record.seconds) == ["gate"] and stop.is_set()


def test_a_titled_walk_numbers_its_rules_under_its_title_never_as_github_groups(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A walk inside a larger command (a baseline in a bisection) keeps standard output,
    where the command's report goes, free of workflow commands."""
    from vllm_plugin_release.core import progress

    g = Graph([Stage("a", _noop), Stage("b", _noop, ("a",))])
    saved = dict(progress._mode)
    progress.configure(interactive=False, github=True)
    try:
        walk(g, title="baseline 0.25.1")
        titled = capsys.readouterr()
        walk(g)
        top = capsys.readouterr()
    finally:
        progress._mode.update(saved)
    assert "::" not in titled.out
    assert "baseline 0.25.1 stage 1/2: a" in titled.err
    assert "baseline 0.25.1 stage 2/2: b" in titled.err
    assert top.out.splitlines() == [
        "::group::stage 1/2: a", "::endgroup::", "::group::stage 2/2: b", "::endgroup::",
    ]  # fmt: skip


def test_a_toy_stage_is_one_entry_and_the_release_walk_runs_it_where_its_edges_say(
    tmp_path: Path,
) -> None:
    """The release's own graph with a toy stage added after build-core: the walk (every
    real stage replaced by a recorder, nothing built) runs it after build-core and before
    what needs it, and numbers the line with it; it needs only build-core, as
    build-plugin and build-guard do, so it runs in their step (side by side, as many at
    once as there are cores: the order they run in is not fixed, the record's is)."""
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.flows.release import Options, Outcome, graph

    spec = load_spec(Path(__file__).resolve().parents[2] / "buildspec" / "reference.toml")
    opts = Options(cache=Cache(tmp_path / ".vpr"), dist_root=tmp_path / "dist", publish=False)
    real = graph(spec, opts, Outcome())
    ran: list[str] = []

    def recorder(name: str):
        return lambda: ran.append(name)

    stages = [Stage(s.name, recorder(s.name), s.needs, s.ahead) for s in real.stages]
    at = [s.name for s in stages].index("build-core") + 1
    stages.insert(at, Stage("toy", recorder("toy"), ("build-core",)))
    stages = [
        Stage(s.name, s.run, (*s.needs, "toy"), s.ahead) if s.name == "env" else s for s in stages
    ]
    g = Graph(stages)
    assert [s.name for s in g.steps()[2]] == ["toy", "build-plugin", "build-guard"]
    record = walk(g)
    line = [n for n in ran if n != "build-env"]
    assert line[:2] == ["lock", "build-core"] and line[5:] == ["env", "conform", "manifest"]
    assert sorted(line[2:5]) == ["build-guard", "build-plugin", "toy"]
    assert "build-env" in ran and list(record.seconds) == ["lock", "build-core", "toy",
        "build-plugin", "build-guard", "env", "conform", "manifest"]  # fmt: skip


def test_the_release_graph_is_the_order_the_flow_always_ran_in(tmp_path: Path) -> None:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.flows.release import Options, Outcome, graph

    spec = load_spec(Path(__file__).resolve().parents[2] / "buildspec" / "reference.toml")
    for publish, tail in ((True, ["publish", "ledger"]), (False, [])):
        opts = Options(cache=Cache(tmp_path / ".vpr"), dist_root=tmp_path, publish=publish)
        g = graph(spec, opts, Outcome())
        assert [s.name for s in g.line()] == [
            "lock", "build-core", "build-plugin", "build-guard", "env", "conform", "manifest",
            *tail,
        ]  # fmt: skip
        assert [s.name for s in g.needed() if s.ahead] == (
            ["build-env", "twine-check"] if publish else ["build-env"]
        )
        assert "build-env" in g["build-core"].needs


def test_release_graph_prints_and_runs_nothing(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    base = [sys.executable, "-m", "vllm_plugin_release", "release", "--spec",
            str(root / "buildspec" / "reference.toml"), "--cache-dir", str(tmp_path / "c"),
            "--dist", str(tmp_path / "d")]  # fmt: skip
    done = subprocess.run([*base, "--graph"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert " 1. lock" in done.stdout and " 9. ledger  <- publish" in done.stdout
    assert " 4. build-guard [not cached]  <- build-core  || beside build-plugin" in done.stdout
    dot = subprocess.run([*base, "--graph", "dot", "--no-publish"], capture_output=True,
                         text=True, check=False)  # fmt: skip
    assert dot.returncode == 0 and dot.stdout.startswith('digraph "release reference"')
    assert "publish" not in dot.stdout
    assert '"build-plugin"; "build-guard"; }' in dot.stdout  # the side-by-side cluster
    assert not (tmp_path / "d").exists()  # nothing built, nothing fetched
    assert not list((tmp_path / "c").rglob("*.tar.gz"))
    bad = subprocess.run([*base, "--graph", "svg"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "invalid choice: 'svg'" in bad.stderr
