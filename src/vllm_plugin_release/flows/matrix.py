"""`vpr matrix run`: the plugin's cpu tests across a range of cores, as one table.

Columns, oldest first: the lowest core the plugin declares (its installer's core
requirement, the lowest published version that satisfies it; `--lowest` overrides), every
published release after it up to the newest (final releases unless `--prereleases`), the
pinned one among them, and vLLM main (a git commit) when `--repo` is given. Each cell builds
the empty-target core (cached), the cpu pairing environment with the plugin wheel built for
the spec, and runs the tests. A regression is a test that passed on the previous column
and fails on this one; a column with regressions is marked. Written as
dist/NAME/matrix.json and matrix.md (no times: the same inputs give the same bytes).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from vllm_plugin_release.buildspec.model import SdistSource, Spec
from vllm_plugin_release.conform.checks.plugin_tests import check as pt
from vllm_plugin_release.conform.lib import specinputs
from vllm_plugin_release.conform.lib.installer import analyzer
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.bisect import first_error_lines, versions_between
from vllm_plugin_release.core.cache import Cache, atomic_write_text, write_json
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges import corehistory
from vllm_plugin_release.edges.fetch import index_files
from vllm_plugin_release.flows.baseline import baseline_python, commit_spec
from vllm_plugin_release.flows.pairing_graph import pairing_python
from vllm_plugin_release.flows.sources import Inputs
from vllm_plugin_release.flows.upstream import releases_from_files, spec_index

REPORT_JSON = "matrix.json"
REPORT_MD = "matrix.md"


@dataclass
class Options:
    cache: Cache
    dist_root: Path
    plugin_source: Path | None = None
    lowest: str | None = None
    index: str | None = None
    prereleases: bool = False
    repo: str | None = None  # add vLLM main (a git commit) as the last column
    ref: str = "main"


def declared_lowest(spec: Spec, root: Path, available: list[str]) -> str | None:
    """The lowest published version the plugin's installer core requirements allow."""
    report = analyzer.scan(
        root,
        specinputs.input_files(spec, specinputs.pinning_options(spec).files),
        spec.core.name,
    )
    reqs = []
    for pin in report.core_pins:
        try:
            reqs.append(Requirement(str(pin.get("requirement", ""))))
        except InvalidRequirement:
            continue
    allowed = [v for v in available if any(r.specifier.contains(v, True) for r in reqs)]
    return min(allowed, key=Version) if allowed else None


def _columns(spec: Spec, opts: Options, inputs: Inputs) -> tuple[list[str], str]:
    if not isinstance(spec.core.source, SdistSource):
        raise BadInput(f"{spec.path}: a version matrix needs an sdist core source (an index)")
    index = spec_index(spec, opts.index)
    found = releases_from_files(spec.core.name, index_files(index, spec.core.name))
    available = [
        r.version
        for r in found
        if r.filename and r.sha256 and (opts.prereleases or not r.prerelease)
    ]
    if spec.core.version not in available:
        available.append(spec.core.version)
    lowest = opts.lowest or declared_lowest(spec, inputs.plugin.root, available)
    lowest = lowest or spec.core.version
    newest = max(available, key=Version)
    return versions_between(lowest, newest, available, index) if lowest != newest else [
        newest
    ], index


@dataclass(frozen=True, slots=True)
class Column:
    """One core of the matrix and the plugin's cpu tests on it."""

    core: str  # a version, or REF@COMMIT for vLLM main
    role: str  # lowest | release | pinned | main
    counts: Mapping[str, int]  # passed, failed, error, skipped
    outcomes: Mapping[str, str]  # test id -> outcome, sorted
    failing: tuple[str, ...]
    errors: Mapping[str, tuple[str, ...]]  # failing test -> the first line of its message
    regressions: tuple[str, ...] = ()  # passed on the column before, fail on this one

    def to_json(self) -> dict[str, Any]:
        """The column as matrix.json has it: these keys, in this order."""
        return {
            "core": self.core,
            "role": self.role,
            "counts": dict(self.counts),
            "outcomes": dict(self.outcomes),
            "failing": list(self.failing),
            "errors": {t: list(lines) for t, lines in self.errors.items()},
            "regressions": list(self.regressions),
        }


@dataclass(frozen=True, slots=True)
class Matrix:
    """The version matrix of one pairing (matrix.json, matrix.md)."""

    pairing: str
    core: str  # the core's name
    index: str  # the package index its releases come from
    columns: tuple[Column, ...]

    @property
    def regressed(self) -> bool:
        return any(col.regressions for col in self.columns)

    def to_json(self) -> dict[str, Any]:
        """matrix.json's object: these keys, in this order."""
        return {
            "pairing": self.pairing,
            "core": self.core,
            "index": self.index,
            "columns": [col.to_json() for col in self.columns],
        }


def _cell(spec: Spec, python: Path, root: Path, cache: Cache, core: str, role: str) -> Column:
    cfg = pt.settings_for(spec)
    with cache.scratch("matrix-") as tmp:
        run = pt.run_tests(python, root, "cpu", cfg, tmp / "j.xml", spec.runtime_module)
        errors = first_error_lines(tmp / "j.xml", 1)
    return Column(
        core=core,
        role=role,
        counts={k: run.counts.get(k, 0) for k in ("passed", "failed", "error", "skipped")},
        outcomes=dict(sorted(run.outcomes.items())),
        failing=tuple(run.failing),
        errors={t: tuple(errors.get(t, [])) for t in run.failing},
    )


def _main_column(spec: Spec, opts: Options, inputs: Inputs, dist: Path) -> Column:
    """The column of core main: `--ref` of `--repo`, built at its commit."""
    url = str(opts.repo)
    repo = corehistory.mirror(url, opts.cache)
    commit = corehistory.resolve(repo, opts.ref, "--ref", url)
    epoch = corehistory.commit_time(repo, commit)
    base = commit_spec(spec, url, commit, epoch, opts.cache, "matrix-main")
    progress.console.rule(f"matrix: {opts.ref} {commit[:12]}")
    python = pairing_python(
        lambda _fetcher: (base, corehistory.checkout(repo, commit, opts.cache)),
        title=f"matrix {opts.ref} {commit[:12]}",
        cache=opts.cache,
        dist=dist,
        plugin=inputs.plugin,
    )
    return _cell(spec, python, inputs.plugin.root, opts.cache, f"{opts.ref}@{commit[:12]}", "main")


def with_regressions(columns: list[Column]) -> tuple[Column, ...]:
    """The columns, the first one's role `lowest` (a release), and each one's regressions:
    the tests that passed on the column before and fail on it (none on the first)."""
    first = columns[0]
    out = [replace(first, role="lowest" if first.role == "release" else first.role)]
    for before, after in itertools.pairwise(columns):
        lost = sorted(t for t in after.failing if before.outcomes.get(t) == "passed")
        out.append(replace(after, regressions=tuple(lost)))
    return tuple(out)


def run_matrix(spec: Spec, opts: Options) -> Matrix:
    """Test every column; write and return the matrix."""
    dist = records.dist_dir(opts.dist_root, spec.name)
    inputs = Inputs(spec, opts.cache, opts.plugin_source)
    versions, index = _columns(spec, opts, inputs)
    records.build_record(
        dist, records.BUILD_PLUGIN, records.producer(records.BUILD_PLUGIN, spec.path)
    )
    columns: list[Column] = []
    for version in versions:
        progress.console.rule(f"matrix: {spec.core.name} {version}")
        python = baseline_python(spec, version, cache=opts.cache, dist=dist, plugin=inputs.plugin)
        role = "pinned" if version == spec.core.version else "release"
        columns.append(_cell(spec, python, inputs.plugin.root, opts.cache, version, role))
    if opts.repo:
        columns.append(_main_column(spec, opts, inputs, dist))
    m = Matrix(spec.name, spec.core.name, index, with_regressions(columns))
    write_json(dist / REPORT_JSON, m.to_json())
    atomic_write_text(dist / REPORT_MD, render_markdown(m))
    return m


def render_markdown(m: Matrix) -> str:
    out = [
        f"### Version matrix: {m.pairing} ({m.core} from {m.index})",
        "",
        "| core | role | passed | failed | regressions vs the column before |",
        "|---|---|---|---|---|",
    ]
    for col in m.columns:
        c = col.counts
        mark = f"**REGRESSED: {len(col.regressions)}**" if col.regressions else "none"
        out.append(
            f"| {col.core} | {col.role} | {c['passed']} | {c['failed'] + c['error']} | {mark} |"
        )
    for col in m.columns:
        if col.regressions:
            out += ["", f"Regressed on {col.core}:"]
            for test in col.regressions:
                first = (col.errors.get(test) or [""])[0]
                out.append(f"- `{test}` {first}".rstrip())
    return "\n".join(out) + "\n"
