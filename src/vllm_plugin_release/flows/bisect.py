"""`vpr bisect`: the first core commit (git) or published version (index) that breaks the
plugin's tests; the ends are probed first, and the report (`bisect.json`, `bisect.md`)
names the first bad candidate and the tests that regressed there."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_plugin_release.buildspec.model import GitSource, SdistSource, Spec
from vllm_plugin_release.conform.checks import plugin_tests as pt
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.bisect import (
    BisectReport,
    BisectStep,
    FirstBad,
    Probe,
    first_error_lines,
    parse_report,
    render_markdown,
    search,
    versions_between,
)
from vllm_plugin_release.core.cache import Cache, atomic_write_text, write_json
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.core.errors import BadInput, RecordProblem
from vllm_plugin_release.edges import git
from vllm_plugin_release.flows.baseline import baseline_env, commit_spec, pairing_env
from vllm_plugin_release.flows.sources import Inputs
from vllm_plugin_release.flows.upstream import published, spec_index

REPORT_JSON = "bisect.json"
REPORT_MD = "bisect.md"


@dataclass
class Options:
    cache: Cache
    dist_root: Path
    plugin_source: Path | None = None
    repo: str | None = None  # a core git repository: bisect commits
    index: str | None = None  # a simple index: bisect published versions
    prereleases: bool = True
    error_lines: int = 3


@dataclass
class Candidates:
    mode: str  # git | index
    source: str
    items: list[str]
    env_of: Callable[[str], EnvRecord]
    subject: Callable[[str], str] = lambda _: ""


def _version(value: str, flag: str) -> str:
    try:
        return str(Version(value))
    except InvalidVersion:
        raise BadInput(f"{flag} {value!r} is not a PEP 440 version (e.g. 0.25.1)")


def git_candidates(spec: Spec, good: str, bad: str, opts: Options, inputs: Inputs) -> Candidates:
    url = opts.repo or (spec.core.source.url if isinstance(spec.core.source, GitSource) else "")
    repo = git.mirror(url, opts.cache)
    good_commit = git.resolve(repo, good, "--good", url)
    bad_commit = git.resolve(repo, bad, "--bad", url)
    items = git.commits_between(repo, good_commit, bad_commit, url)
    dist = records.dist_dir(opts.dist_root, spec.name)

    def env_of(commit: str) -> EnvRecord:
        epoch = git.commit_time(repo, commit)
        base = commit_spec(spec, url, commit, epoch, opts.cache, f"bisect-{commit[:12]}")
        return pairing_env(
            lambda _fetcher: (base, git.checkout(repo, commit, opts.cache)),
            title=f"bisect {commit[:12]}",
            cache=opts.cache,
            dist=dist,
            plugin=inputs.plugin,
        )

    return Candidates("git", url, items, env_of, subject=lambda c: git.subject(repo, c))


def index_candidates(spec: Spec, good: str, bad: str, opts: Options, inputs: Inputs) -> Candidates:
    if not isinstance(spec.core.source, SdistSource):
        raise BadInput(
            f"{spec.path}: a bisection over published versions needs an sdist core source",
            hint="pass --repo URL to bisect the core's git history instead",
        )
    index = spec_index(spec, opts.index)
    source = dataclasses.replace(spec.core.source, index=index)
    spec = dataclasses.replace(spec, core=dataclasses.replace(spec.core, source=source))
    available = published(spec.core.name, index, opts.prereleases)
    items = versions_between(_version(good, "--good"), _version(bad, "--bad"), available, index)
    dist = records.dist_dir(opts.dist_root, spec.name)

    def env_of(version: str) -> EnvRecord:
        return baseline_env(spec, version, cache=opts.cache, dist=dist, plugin=inputs.plugin)

    return Candidates("index", index, items, env_of)


def _prober(spec: Spec, cands: Candidates, opts: Options, inputs: Inputs) -> Callable[[str], Probe]:
    cfg = pt.settings_for(spec)
    seen: dict[str, Probe] = {}

    def probe(candidate: str) -> Probe:
        if candidate not in seen:
            progress.console.rule(f"bisect: {cands.mode} {candidate}")
            env = cands.env_of(candidate)
            with opts.cache.scratch("bisect-") as tmp:
                junit = tmp / "junit.xml"
                run = pt.run_in_env(env, inputs.plugin.root, cfg, junit)
                errors = first_error_lines(junit, opts.error_lines)
            seen[candidate] = Probe(candidate, tuple(run.failing), errors)
            progress.info(f"bisect: {candidate}: {len(run.failing)} failing test(s)")
        return seen[candidate]

    return probe


def _ends(cands: Candidates, probe: Callable[[str], Probe], good: str, bad: str) -> list[str]:
    """Probe both ends; the tests failing at the bad end and not at the good one (one already
    failing at the good end is said and not watched). Exit 2 when nothing regressed."""
    if len(cands.items) < 2:
        raise BadInput(f"--good {good} and --bad {bad} are the same {cands.mode} candidate")
    first = probe(cands.items[0])
    last = probe(cands.items[-1])
    if not last.failing:
        raise BadInput(
            f"--bad {bad}: the bad end passes: every plugin test passes there",
            hint="pick a newer --bad where the plugin's cpu tests fail",
        )
    before = set(first.failing)
    watched = [t for t in last.failing if t not in before]
    if not watched:
        raise BadInput(
            f"--good {good}: the good end already fails every test that fails at --bad {bad} "
            f"({len(first.failing)} plugin test(s) fail there; first: {first.failing[0]})",
            hint="pick an older --good where those tests pass",
        )
    if before:
        progress.warn(
            f"bisect: {len(before)} test(s) already fail at --good {good} (first: "
            f"{first.failing[0]}); watching the {len(watched)} that regressed"
        )
    return watched


def bisect_report(spec: Spec, good: str, bad: str, opts: Options) -> BisectReport:
    """Find the first bad candidate; write bisect.json and bisect.md, return the report."""
    if not spec.plugin:
        raise BadInput(f"{spec.path}: no [plugin]; bisection runs the plugin's tests")
    dist = records.dist_dir(opts.dist_root, spec.name)
    inputs = Inputs(spec, opts.cache, opts.plugin_source)
    git_mode = bool(opts.repo) or isinstance(spec.core.source, GitSource)
    make = git_candidates if git_mode else index_candidates
    cands = make(spec, good, bad, opts, inputs)  # bad ends are refused before any build
    records.build_record(
        dist, records.BUILD_PLUGIN, records.producer(records.BUILD_PLUGIN, spec.path)
    )
    probe = _prober(spec, cands, opts, inputs)
    watched = _ends(cands, probe, good, bad)
    found, steps = search(cands.items, watched, probe)
    first = probe(cands.items[found])
    failing = first.broken_by(watched)
    report = BisectReport(
        mode=cands.mode,
        source=cands.source,
        core=spec.core.name,
        good=good,
        bad=bad,
        candidates=len(cands.items),
        watched=tuple(watched),
        steps=tuple(BisectStep(c, v) for c, v in steps),
        last_good=cands.items[found - 1],
        first_bad=FirstBad(
            first.candidate,
            cands.subject(first.candidate),
            tuple(failing),
            {t: tuple(first.errors.get(t, [])) for t in failing},
        ),
    )
    write_json(dist / REPORT_JSON, report.to_json())
    atomic_write_text(dist / REPORT_MD, render_markdown(report))
    return report


def read_report(dist: Path) -> BisectReport | None:
    """The last bisect report in `dist` (read bounded, each key checked), or None when
    there is none or it is unusable."""
    return records.read_object(dist / REPORT_JSON, _report_or_none)


def _report_or_none(data: Any) -> BisectReport | None:
    try:
        return parse_report(data)
    except RecordProblem:
        return None
