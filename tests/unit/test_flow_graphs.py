"""The flows' stage graphs (flows/stagewalk.Extra): release, the pairing graph that baseline,
nightly, bisect, matrix and plugin-tests walk, and the hardware runner's. A toy stage is
one module (its function, here) and one entry, and every graph it joins places it where
its needs say and runs it there; a need a graph lacks is refused by name. Nothing is
built: the real stages are swapped for recorders where a walk would run them."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import envrecord
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.stagegraph import Graph, Stage
from vllm_plugin_release.edges.fetch import Fetcher
from vllm_plugin_release.edges.plugin_source import PluginSource
from vllm_plugin_release.flows import baseline, hardware, release, stagewalk
from vllm_plugin_release.flows.stagewalk import Context, Extra, walk

SPECS = Path(__file__).resolve().parents[2] / "buildspec"


def _release_graph(tmp_path: Path, spec: Spec) -> Graph:
    opts = release.Options(cache=Cache(tmp_path / ".vpr"), dist_root=tmp_path / "d", publish=False)
    return release.graph(spec, opts, release.Outcome())


def _pairing(tmp_path: Path, spec: Spec) -> baseline.Pairing:
    cache = Cache(tmp_path / ".vpr")
    return baseline.Pairing(
        source=lambda _fetcher: (spec, tmp_path / "core"),
        cache=cache,
        dist=tmp_path / "dist",
        plugin=PluginSource(tmp_path / "plugin", "path", str(tmp_path / "plugin"), None, 0),
        dist_root=tmp_path / "d",
        fetcher=Fetcher(cache),
    )


def _hardware_graph(tmp_path: Path, spec: Spec, monkeypatch: pytest.MonkeyPatch) -> Graph:
    monkeypatch.delenv("VPR_RUNTIME_ENV", raising=False)
    opts = hardware.Options(cache=Cache(tmp_path / ".vpr"), dist_root=tmp_path / "d")
    return hardware.graph(hardware._Steps(spec, opts, spec.path))


def _line(graph: Graph) -> list[str]:
    return [s.name for s in graph.line()]


def test_the_graphs_without_extras_are_the_order_the_flows_always_ran_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_spec(SPECS / "reference.toml")
    assert _line(baseline.graph(_pairing(tmp_path, spec))) == [
        "core-source", "build-lock", "build-core", "env-lock", "plugin-wheel", "env",
    ]  # fmt: skip
    # the runtime the lock installs (tt: ttnn) is probed again in the environment
    tt = load_spec(SPECS / "tt.toml")
    assert _line(_hardware_graph(tmp_path, tt, monkeypatch)) == [
        "probe", "env", "runtime-probe", "conform", "live",
    ]  # fmt: skip
    assert _line(_hardware_graph(tmp_path, spec, monkeypatch)) == [
        "probe", "env", "conform", "live",
    ]  # fmt: skip


def _steps(graph: Graph) -> list[list[str]]:
    return [[s.name for s in step] for step in graph.steps()]


def test_the_line_stages_that_run_side_by_side_in_each_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the needs allow it: the plugin's and the guard's builds (release), the
    derived env lock and the plugin wheel's copy (pairing); the hardware line is a chain."""
    spec = load_spec(SPECS / "reference.toml")
    assert _steps(_release_graph(tmp_path, spec)) == [
        ["lock"], ["build-core"], ["build-plugin", "build-guard"], ["env"], ["conform"],
        ["manifest"],
    ]  # fmt: skip
    assert _steps(baseline.graph(_pairing(tmp_path, spec)))[3:] == [
        ["env-lock", "plugin-wheel"], ["env"],
    ]  # fmt: skip
    assert all(len(step) == 1 for step in _steps(_hardware_graph(tmp_path, spec, monkeypatch)))


def test_a_toy_stage_is_one_entry_and_every_graph_places_it_after_its_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_spec(SPECS / "reference.toml")
    toy = Extra("toy", lambda ctx: None, needs=("env",), about="a toy")
    with stagewalk.added(toy):
        rel = _release_graph(tmp_path, spec)
        pairing = baseline.graph(_pairing(tmp_path, spec))
        hw = _hardware_graph(tmp_path, spec, monkeypatch)
    assert _line(rel) == [
        "lock", "build-core", "build-plugin", "build-guard", "env", "toy", "conform", "manifest",
    ]  # fmt: skip
    assert _line(pairing)[-2:] == ["env", "toy"]  # baseline, nightly, bisect, matrix
    assert _line(hw) == ["probe", "env", "toy", "conform", "live"]
    assert rel["toy"].needs == ("env",) and rel["toy"].about == "a toy"
    # a stage for some graphs only: after build-core, where there is one
    early = Extra("early", lambda ctx: None, needs=("build-core",), graphs=("release", "pairing"))
    with stagewalk.added(early):
        assert _line(_release_graph(tmp_path, spec))[1:3] == ["build-core", "early"]
        assert _line(baseline.graph(_pairing(tmp_path, spec)))[2:4] == [
            "build-core", "early",
        ]  # fmt: skip
        assert "early" not in _line(_hardware_graph(tmp_path, spec, monkeypatch))
    assert stagewalk.EXTRAS == []  # removed with its block


def test_the_pairing_walk_runs_a_toy_stage_with_its_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """core-source runs for real (the source is at hand), the build stages are recorders,
    the toy is the registered function and gets the pairing's spec."""
    spec = load_spec(SPECS / "reference.toml")
    p = _pairing(tmp_path, spec)
    seen: list[str] = []

    def toy(ctx: Context) -> None:
        seen.append(f"toy in {ctx.graph} for {ctx.spec.name} at {ctx.dist_root}")

    with stagewalk.added(Extra("toy", toy, needs=("build-core",), graphs=("pairing",))):
        real = baseline.graph(p)
    swap = {"core-source", "toy"}
    stages = [
        s if s.name in swap else Stage(s.name, lambda n=s.name: seen.append(n), s.needs)
        for s in real.stages
    ]
    done = walk(Graph(stages), title="baseline 0.25.1")
    assert seen == [
        "build-lock", "build-core", f"toy in pairing for {spec.name} at {tmp_path / 'd'}",
        "env-lock", "plugin-wheel", "env",
    ]  # fmt: skip
    assert p.tree == tmp_path / "core" and done.failed is None
    err = capsys.readouterr().err
    assert "baseline 0.25.1 stage 4/7: toy" in err and "stage 7/7: env" in err


def test_a_toy_stage_needing_a_stage_a_graph_lacks_is_refused_by_name(tmp_path: Path) -> None:
    spec = load_spec(SPECS / "reference.toml")
    with (
        stagewalk.added(Extra("toy", lambda ctx: None, needs=("nope",))),
        pytest.raises(ValueError, match="extra stage 'toy' needs 'nope', which the release graph"),
    ):
        _release_graph(tmp_path, spec)
    with (
        stagewalk.added(Extra("toy", lambda ctx: None, needs=("conform",))),
        pytest.raises(ValueError, match="needs 'conform', which the pairing graph does not"),
    ):
        baseline.graph(_pairing(tmp_path, spec))
    with pytest.raises(ValueError, match="no graph 'docs'"):
        stagewalk.add(Extra("toy", lambda ctx: None, needs=(), graphs=("docs",)))
    with (
        stagewalk.added(Extra("toy", lambda ctx: None, needs=())),
        pytest.raises(ValueError, match="'toy' is added twice"),
    ):
        stagewalk.add(Extra("toy", lambda ctx: None, needs=()))
    with (  # a name the graph already has is refused by the graph itself
        stagewalk.added(Extra("conform", lambda ctx: None, needs=("env",))),
        pytest.raises(ValueError, match="'conform' is declared twice"),
    ):
        _release_graph(tmp_path, spec)
    assert stagewalk.EXTRAS == []


@pytest.mark.parametrize(("verdict", "code", "ran"), [("lab", 1, []), ("pilot", 0, ["live"])])
def test_conform_hardware_halts_at_verdict_lab_and_otherwise_returns_lives_code(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    verdict: str,
    code: int,
    ran: list[str],
) -> None:
    """The walk's sequencing only: probe and env stand in (a cpu machine has neither the
    device nor the runtime), conformance gives `verdict`, live records its call."""
    from vllm_plugin_release.conform import suite
    from vllm_plugin_release.core.cardrecord import Scorecard

    spec = load_spec(SPECS / "reference.toml")
    calls: list[str] = []
    monkeypatch.setattr(hardware._Steps, "probe", lambda self: calls.append("probe"))
    record = envrecord.parse({"python": "/env/python", "runner": "hardware"})
    monkeypatch.setattr(hardware._Steps, "env", lambda self: setattr(self, "record", record))
    card = Scorecard(verdict, "hardware", {}, ())
    monkeypatch.setattr(suite, "conform_cached", lambda ctx: card)
    monkeypatch.setattr(suite, "verdict_line", lambda card, dist: f"verdict {card.verdict}")
    monkeypatch.setattr(hardware, "live", lambda *args: calls.append("live") or 0)
    monkeypatch.delenv("VPR_RUNTIME_ENV", raising=False)
    opts = hardware.Options(cache=Cache(tmp_path / ".vpr"), dist_root=tmp_path / "d")
    assert hardware.conform_hardware(spec, opts, spec.path) == code
    assert calls == ["probe", *ran]
    out = capsys.readouterr()
    assert out.out == "/env/python\n"  # standard output as before: the env's Python only
    assert "stage 3/4: conform" in out.err and ("stage 4/4: live" in out.err) == bool(ran)
