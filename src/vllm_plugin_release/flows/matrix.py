"""`vpr matrix run`: the plugin across a range of cores, a column per core, each on the Python
that core allows; every column's record is written as it ends and matrix.json / matrix.md are
assembled from the records (core/columns)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from vllm_plugin_release import __version__
from vllm_plugin_release.buildspec.model import SdistSource, Spec
from vllm_plugin_release.conform.checks import plugin_tests as pt
from vllm_plugin_release.conform.lib import apicoupling, installscan
from vllm_plugin_release.core import columns as cols
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.bisect import first_error_lines, versions_between
from vllm_plugin_release.core.cache import Cache, atomic_write_text, key_of, walk
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.core.errors import BadInput, VprError
from vllm_plugin_release.edges import git
from vllm_plugin_release.flows.baseline import Release, commit_spec, pairing_env, release_pairing
from vllm_plugin_release.flows.sources import Inputs
from vllm_plugin_release.flows.upstream import published, spec_index

PACKAGE = Path(__file__).resolve().parent.parent
TIMING = "matrix-timing.json"  # seconds per column and phase: this run's, not deterministic


@dataclass
class Options:
    cache: Cache
    dist_root: Path
    plugin_source: Path | None = None
    lowest: str | None = None
    newest: str | None = None
    index: str | None = None
    prereleases: bool = False
    repo: str | None = None  # add vLLM main (a git commit) as the last column
    ref: str = "main"
    only: tuple[str, ...] = ()  # run these columns only (a CI job each); assemble later
    store: str | None = None  # record every column in this store's ledger (flows/ledger)
    signing_key: str | None = None


@dataclass(frozen=True)
class Plan:
    """The columns of a matrix, oldest first, and where their releases come from."""

    index: str
    versions: tuple[str, ...]
    pinned: str

    def role(self, version: str) -> str:
        return "pinned" if version == self.pinned else "release"

    def before(self, version: str) -> str:
        """The column before `version` (itself for the first): what its coupling is against."""
        i = self.versions.index(version)
        return self.versions[i - 1] if i else version


def declared_lowest(spec: Spec, root: Path, available: list[str]) -> str | None:
    """The lowest published version the plugin's installer core requirements allow."""
    report = installscan.scan(
        root,
        installscan.input_files(spec, installscan.pinning_options(spec).files),
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


def plan(spec: Spec, opts: Options, plugin_root: Callable[[], Path]) -> Plan:
    """The columns: the lowest core the plugin declares (`--lowest` overrides; the pinned
    one when it declares none), every published release after it up to the newest
    (`--newest`, else the newest on the index), final ones unless asked."""
    if not isinstance(spec.core.source, SdistSource):
        raise BadInput(f"{spec.path}: a version matrix needs an sdist core source (an index)")
    index = spec_index(spec, opts.index)
    available = published(spec.core.name, index, opts.prereleases)
    if spec.core.version not in available:
        available.append(spec.core.version)
    lowest = opts.lowest
    if lowest is None and spec.plugin is not None:  # only then is the plugin source read
        lowest = declared_lowest(spec, plugin_root(), available)
    lowest = lowest or spec.core.version
    newest = opts.newest or max(available, key=Version)
    versions = [newest] if lowest == newest else versions_between(lowest, newest, available, index)
    return Plan(index, tuple(versions), spec.core.version)


def code_digest() -> str:
    """The content of vpr's own modules: a column made by other code is made again."""
    h = hashlib.sha256(__version__.encode())
    for rel, entry in walk(PACKAGE, frozenset({"__pycache__"})):
        if rel.endswith((".py", ".json")):
            h.update(rel.encode() + b"\0" + Path(entry.path).read_bytes())
    return h.hexdigest()


@dataclass
class _Run:
    """What every column of one run shares."""

    spec: Spec
    opts: Options
    inputs: Inputs
    dist: Path  # the spec's dist folder: its plugin wheel
    folder: Path  # dist/NAME/matrix/
    plan: Plan
    cfg: pt.TestSettings
    code: str
    plugin: dict[str, str | None]  # what every column of this run tests: {name, version, commit}

    timing: dict[str, dict[str, float]] = field(default_factory=dict)

    def clock(self, label: str) -> Callable[[str], None]:
        """Marks the end of each phase of column `label` (run-specific: matrix-timing.json)."""
        phases = self.timing.setdefault(label, {})
        last = [time.monotonic()]

        def mark(phase: str) -> None:
            now = time.monotonic()
            phases[phase] = round(phases.get(phase, 0.0) + now - last[0], 2)
            last[0] = now

        return mark

    def key(self, version: str, sha256: str, python: str | None) -> str:
        wheel = records.build_record(self.dist, records.BUILD_PLUGIN).wheel
        return key_of(
            {
                "core": [version, sha256, self.plan.before(version)],
                "python": python,
                "spec": self.spec.raw,
                "plugin": [self.inputs.plugin.commit, wheel.sha256],
                "tests": self.cfg.key(),
                "vpr": self.code,
            }
        )


def _scrub(text: str, *folders: Path) -> str:
    for folder in folders:
        text = text.replace(f"{folder}/", "").replace(str(folder), "<here>")
    return text


def tested(
    run: _Run,
    env: EnvRecord,
    label: str,
    base: cols.Column,
    report: apicoupling.CouplingReport | dict[str, object] | None = None,
    against: str = "",
) -> cols.Column:
    """The plugin's tests in the column's environment, classified as the release does, and
    which of its failures (every module that does not import, every failing test) the
    coupling `report` explains: the matrix counts those that regressed when it assembles."""
    root = run.inputs.plugin.root
    env_dir = Path(env.python).parent.parent
    with run.opts.cache.scratch("matrix-") as tmp:
        result = pt.run_in_env(env, root, run.cfg, tmp / "j.xml")
        texts = first_error_lines(tmp / "j.xml", 40)
    errors = {t: lines[:1] for t, lines in texts.items()}
    coupling = base.coupling
    if report is not None:
        traced = None
        if isinstance(report, apicoupling.CouplingReport):
            failing = {t: "\n".join(texts.get(t, [])) for t in result.failing}
            tracing = apicoupling.trace_failures(report, pt.failed_imports(env), failing)
            traced = {k: list(v) for k, v in sorted(tracing.traced.items())}
        coupling = cols.Coupling(_coupling_json(report, against, traced))
    counts = {k: result.counts.get(k, 0) for k in cols.COUNT_KEYS}
    scrub = (env_dir, root, run.opts.cache.root)
    return replace(
        base,
        core=label,
        status="tested",
        exit_class=0,
        imports={
            m: _scrub(e.splitlines()[0] if e else "", *scrub)
            for m, e in pt.failed_imports(env).items()
        },
        modules=len(env.plugin_modules),
        counts=counts,
        outcomes=dict(sorted(result.outcomes.items())),
        errors={t: tuple(_scrub(x, *scrub) for x in errors.get(t, [])) for t in result.failing},
        coupling=coupling,
    )


def _against(
    run: _Run, found: Release
) -> tuple[str, apicoupling.CouplingReport | dict[str, object]]:
    """The core this column's coupling report is against (`_earlier_tree`) and the report:
    what the plugin uses that changed, and on the first column what it imports that the core
    never defined. When no earlier core can be read, the report is left out, saying why."""
    version = found.spec.core.version
    try:
        before, old = _earlier_tree(run, version, found)
        return before, apicoupling.coupling(
            run.inputs.plugin.root,
            old,
            found.tree,
            run.spec.core.name,
            versions=(before, version),
            cache_dir=run.opts.cache.root / "coupling",
        )
    except VprError as exc:
        before = run.plan.before(version)
        return before, {"against": before, "status": "error", "reason": _one_line(exc)}


def _coupling_json(
    report: apicoupling.CouplingReport | dict[str, object],
    against: str,
    traced: dict[str, list[str]] | None,
) -> dict[str, object]:
    if isinstance(report, dict):
        return report
    return {"against": against, **report.to_json(), "traced": traced or {}}


def release_column(run: _Run, version: str) -> cols.Column:
    """One release's column: reused when its record has the same inputs, else run; a column
    that cannot be built, installed or tested is recorded with its reason and exit class."""
    spec, fetcher = run.spec, run.inputs.fetcher
    role = run.plan.role(version)
    no_python = cols.PythonChoice(None, "not chosen: the core could not be read")
    clock = run.clock(version)
    try:
        found: Release = release_pairing(spec, version, fetcher)
    except VprError as exc:
        return cols.not_run(version, role, "", no_python, exc.exit_code, _one_line(exc))
    choice = found.python
    key = run.key(version, found.spec.core.source.sha256, choice.python)
    kept = cols.read_column(cols.record_path(run.folder, version))
    clock("sources")
    if kept is not None and kept.key == key:
        progress.info(f"matrix: {version}: reused its record ({kept.status})")
        return kept
    against, report = _against(run, found)
    coupling = cols.Coupling(_coupling_json(report, against, None))
    base = replace(cols.not_run(version, role, key, choice, 0, ""), coupling=coupling)
    clock("coupling")
    try:
        if choice.python is None:
            return replace(base, exit_class=2, reason=f"no Python: {choice.why}")
        progress.info(f"matrix: {version} on Python {choice.python}: {choice.why}")
        env = pairing_env(
            lambda _f: (found.spec, found.tree),
            title=f"matrix {version}",
            cache=run.opts.cache,
            dist=run.dist,
            plugin=run.inputs.plugin,
        )
        clock("pairing")
        return tested(run, env, version, base, report, against)
    except VprError as exc:
        return _with_reason(base, exc)
    finally:
        clock("tests")


def _earlier_tree(run: _Run, version: str, found: Release) -> tuple[str, Path]:
    """The core the column's coupling report is against, and its tree: the column before,
    else the nearest earlier one whose sdist can be fetched (that column's own record says
    why it could not), the same in every job; the column itself for the first."""
    earlier = run.plan.versions[: run.plan.versions.index(version)]
    first: VprError | None = None
    for before in reversed(earlier):
        try:
            return before, release_pairing(run.spec, before, run.inputs.fetcher).tree
        except VprError as exc:
            first = first or exc
            progress.warn(f"matrix: {version}: no coupling against {before}: {_one_line(exc)}")
    if first is not None:
        raise first
    return version, found.tree


def _with_reason(col: cols.Column, exc: VprError) -> cols.Column:
    return replace(col, status="not-run", exit_class=exc.exit_code, reason=_one_line(exc))


def _one_line(exc: VprError) -> str:
    lines = [line for line in exc.message.splitlines() if line.strip()]
    return " / ".join(lines[:3])[:600]


def main_column(run: _Run) -> cols.Column:
    """The column of core main: `--ref` of `--repo`, built at its commit on the spec's
    Python (a commit declares no release's Requires-Python to follow)."""
    spec, opts = run.spec, run.opts
    url = str(opts.repo)
    repo = git.mirror(url, opts.cache)
    commit = git.resolve(repo, opts.ref, "--ref", url)
    label = f"{opts.ref}@{commit[:12]}"
    python = cols.PythonChoice(spec.build.python, "the spec's Python (a commit, not a release)")
    key = key_of({"main": [url, commit], "spec": spec.raw, "vpr": run.code})
    base = cols.not_run(label, "main", key, python, 0, "")
    try:
        epoch = git.commit_time(repo, commit)
        derived = commit_spec(spec, url, commit, epoch, opts.cache, "matrix-main")
        env = pairing_env(
            lambda _f: (derived, git.checkout(repo, commit, opts.cache)),
            title=f"matrix {label}",
            cache=opts.cache,
            dist=run.dist,
            plugin=run.inputs.plugin,
        )
        return tested(run, env, label, base)
    except VprError as exc:
        return _with_reason(base, exc)


def assemble(spec_name: str, core: str, index: str, found: list[cols.Column]) -> cols.Matrix:
    return cols.Matrix(spec_name, core, index, tuple(cols.assemble(found)))


def write(dist: Path, m: cols.Matrix) -> None:
    atomic_write_text(dist / cols.REPORT_JSON, cols.render_json(m))
    atomic_write_text(dist / cols.REPORT_MD, cols.render_markdown(m))


def run_matrix(spec: Spec, opts: Options) -> cols.Matrix:
    """Run every column (or `opts.only`), each record written as it ends; assemble the plan's."""
    if opts.only and opts.store:
        raise BadInput(
            "--only with --store: a column alone has no column before it to regress against",
            hint="record the columns where they are assembled: `vpr matrix assemble --store S`",
        )
    dist = records.dist_dir(opts.dist_root, spec.name)
    inputs = Inputs(spec, opts.cache, opts.plugin_source)
    producer = records.producer(records.BUILD_PLUGIN, spec.path)
    built = records.build_record(dist, records.BUILD_PLUGIN, producer)
    the_plan = plan(spec, opts, lambda: inputs.plugin.root)
    folder = dist / cols.FOLDER
    plugin = {"name": built.name, "version": built.version, "commit": inputs.plugin.commit}
    run = _Run(
        spec, opts, inputs, dist, folder, the_plan, pt.settings_for(spec), code_digest(), plugin
    )
    wanted = [v for v in the_plan.versions if not opts.only or v in opts.only]
    unknown = sorted(set(opts.only) - set(the_plan.versions))
    if unknown:
        raise BadInput(
            f"--only {', '.join(unknown)}: not a column of this matrix "
            f"({', '.join(the_plan.versions)})",
            hint="`vpr upstream --spec FILE --github-output` lists the columns",
        )
    progress.info(
        f"matrix: {len(the_plan.versions)} columns ({', '.join(the_plan.versions)}), one at a "
        "time: each column's build and tests already use both cores"
    )
    done: list[cols.Column] = []
    for n, version in enumerate(wanted, 1):
        progress.console.rule(f"matrix {n}/{len(wanted)}: {spec.core.name} {version}")
        done.append(_kept(folder, replace(release_column(run, version), plugin=run.plugin)))
    if opts.repo and not opts.only:
        done.append(_kept(folder, replace(main_column(run), plugin=run.plugin)))
    timing = {"columns": run.timing, "side_by_side": 1}
    atomic_write_text(dist / TIMING, json.dumps(timing, indent=2, sort_keys=True) + "\n")
    m = assemble(spec.name, spec.core.name, the_plan.index, done)
    if not opts.only:
        write(dist, m)
        _record(spec, opts, dist, m)
    return m


def _kept(folder: Path, column: cols.Column) -> cols.Column:
    """The column's record, written and read back (the matrix is assembled from records)."""
    kept = cols.read_column(cols.write_column(folder, column))
    if kept is None:  # written a moment ago
        raise RuntimeError(f"{folder}: the record of {column.core} vanished")
    _say(kept)
    return kept


def _record(spec: Spec, opts: Options, dist: Path, m: cols.Matrix) -> None:
    """Every column in the store's signed ledger, when a store is given (once per record)."""
    if opts.store is None:
        return
    from vllm_plugin_release.flows.ledger import record_columns

    record_columns(spec, m, dist, cache=opts.cache, store=opts.store, signing=opts.signing_key)


def _say(column: cols.Column) -> None:
    if not column.tested:
        progress.warn(f"matrix: {column.core}: not run (exit {column.exit_class}): {column.reason}")
        return
    c = column.counts
    progress.info(
        f"matrix: {column.core} (Python {column.python}): {len(column.imports)} of "
        f"{column.modules} modules fail to import; {c['passed']} passed, "
        f"{c['failed'] + c['error']} failed, {c['deferred']} deferred"
    )


def assemble_folder(
    spec: Spec, dist_root: Path, index: str | None = None, opts: Options | None = None
) -> cols.Matrix:
    """matrix.json/.md from dist/NAME/matrix/'s records; each column in the ledger with a store."""
    dist = records.dist_dir(dist_root, spec.name)
    found = cols.read_folder(dist / cols.FOLDER)
    if not found:
        raise BadInput(
            f"{dist / cols.FOLDER}: no column records",
            hint=f"run `vpr matrix run --spec {spec.path}` (or its --only jobs) first",
        )
    m = assemble(spec.name, spec.core.name, spec_index(spec, index), found)
    write(dist, m)
    if opts is not None:
        _record(spec, opts, dist, m)
    return m
