"""`vpr nightly`: the plugin against a core commit (vLLM main) on a backing-off schedule, with a
signed last-known-good pointer that moves on pass and a failure report naming the tests, the
commits since the last good one and the `vpr bisect` command that finds the break."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from vllm_plugin_release.buildspec.model import GitSource, Spec
from vllm_plugin_release.conform.checks import plugin_tests as pt
from vllm_plugin_release.core import progress, records, schedule
from vllm_plugin_release.core.bisect import first_error_lines
from vllm_plugin_release.core.cache import Cache, write_json
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges import git, trust
from vllm_plugin_release.edges.store import open_store
from vllm_plugin_release.edges.trust import TRUST_DIR, Trusted
from vllm_plugin_release.flows.baseline import commit_spec, pairing_env
from vllm_plugin_release.flows.ledger import Verdict, now_utc, record_verdict, signing_key
from vllm_plugin_release.flows.sources import Inputs
from vllm_plugin_release.stages.publish import resolve_targets

SUFFIX = "nightly"  # the nightly pairing's name: NAME-nightly
REPORT = "nightly.json"


@dataclass
class Options:
    cache: Cache
    dist_root: Path
    repo: str | None = None
    ref: str = "main"
    store: str | None = None
    signing_key: str | None = None
    plugin_source: Path | None = None
    force: bool = False
    interval: int = schedule.INTERVAL_HOURS
    backoff: int = schedule.BACKOFF_HOURS
    now: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class CoreRef:
    """The core commit a nightly ran on: the repository, the ref asked for, the commit."""

    url: str
    ref: str
    commit: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Since:
    """The core commits since the last-known-good one (what a bisection would search):
    `commits` None when not known; `subjects` (the last 20) only when they are."""

    last_known_good: str | None
    commits: int | None = None
    subjects: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"last_known_good": self.last_known_good, "commits": self.commits}
        if self.subjects is not None:
            out["subjects"] = list(self.subjects)
        return out


@dataclass(frozen=True, slots=True)
class NightlyReport:
    """One nightly run (nightly.json): pass|fail with what ran, or skipped with `reason`.
    A pass names the last-known-good pointer it wrote; a failure what changed since it."""

    status: str  # pass | fail | skipped
    reason: str = ""  # skipped: why (the schedule)
    pairing: str = ""
    core: CoreRef | None = None
    plugin_commit: str | None = None
    manifest: str = ""
    failing: tuple[str, ...] = ()
    errors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # test -> first lines
    last_known_good: str | None = None  # pass: where the pointer was written
    since: Since | None = None  # fail
    bisect: str | None = None  # fail, with a last-known-good commit: the command to run

    def to_json(self) -> dict[str, Any]:
        """The report as nightly.json has it: these keys, in this order."""
        if self.status == "skipped":
            return {"status": "skipped", "reason": self.reason}
        out: dict[str, Any] = {
            "status": self.status,
            "pairing": self.pairing,
            "core": None if self.core is None else self.core.to_json(),
            "plugin_commit": self.plugin_commit,
            "manifest": self.manifest,
            "failing": list(self.failing),
            "errors": {t: list(lines) for t, lines in self.errors.items()},
        }
        if self.last_known_good is not None:
            out["last_known_good"] = self.last_known_good
        if self.since is not None:
            out["since_last_known_good"] = self.since.to_json()
        if self.bisect is not None:
            out["bisect"] = self.bisect
        return out


def _core_url(spec: Spec, repo: str | None) -> str:
    if repo:
        return repo
    if isinstance(spec.core.source, GitSource):
        return spec.core.source.url
    raise BadInput(
        f"{spec.path}: the core source is an sdist; a nightly needs the core's git repository",
        hint="pass --repo URL (e.g. https://github.com/vllm-project/vllm)",
    )


def _since(repo: Path, lkg: schedule.Pointer | None, commit: str, url: str) -> Since:
    """The commits since the last-known-good one (what a bisection would search)."""
    if lkg is None or not lkg.core_commit:
        return Since(None)
    good = lkg.core_commit
    try:
        between = git.commits_between(repo, good, commit, url)[1:]
    except BadInput:
        return Since(good)
    subjects = tuple(f"{c[:12]} {git.subject(repo, c)}" for c in between[-20:])
    return Since(good, len(between), subjects)


def _outcome(
    spec: Spec,
    report: NightlyReport,
    store: Any,
    key: Any,
    repo: Path,
    lkg: schedule.Pointer | None,
) -> NightlyReport:
    """Pass: move the signed last-known-good pointer. Fail: say what broke since it."""
    core = report.core
    assert core is not None  # a run that tested a commit
    if report.status == "pass":
        pointer = schedule.Pointer(
            pairing=spec.name,
            core_url=core.url,
            core_commit=core.commit,
            plugin_commit=report.plugin_commit,
            time=now_utc(),
        )
        written = str(trust.write_lkg(store, spec.name, pointer, key))
        return replace(report, last_known_good=written)
    since = _since(repo, lkg, core.commit, core.url)
    good = lkg.core_commit if lkg is not None else None
    bisect = (
        f"vpr bisect --spec {spec.path} --repo {core.url} --good {good} --bad {core.commit}"
        if good
        else None
    )
    return replace(report, since=since, bisect=bisect)


def _trusted(store: Any, key: Any, cache: Cache, now: dt.datetime) -> Trusted:
    """The store read through its signed head with the manifest key's public half; its
    expiry not checked (this run signs the next head), a missing head read as no state."""
    memory = cache.root / TRUST_DIR
    return Trusted(store, key.public_key(), memory=memory, fresh=False, required=False, now=now)


def nightly(spec: Spec, opts: Options) -> NightlyReport:
    """One nightly run (or a skip); the report (also dist/NAME-nightly/nightly.json)."""
    if not spec.plugin:
        raise BadInput(f"{spec.path}: no [plugin]; the nightly runs the plugin's tests")
    url = _core_url(spec, opts.repo)
    store = open_store(resolve_targets(spec, None, opts.store, opts.cache.root)[1])
    key = signing_key(spec, opts.cache, opts.signing_key)
    now = opts.now or dt.datetime.now(dt.timezone.utc)
    trusted = _trusted(store, key, opts.cache, now)
    state = trust.read_state(trusted, spec.name)  # None: none, or unreadable
    run_now, why = schedule.due(state, now, interval=opts.interval, backoff=opts.backoff)
    if not run_now and not opts.force:
        progress.info(f"nightly: skipped ({why})")
        return NightlyReport("skipped", reason=why)
    repo = git.mirror(url, opts.cache)
    commit = git.resolve(repo, opts.ref, "--ref", url)
    lkg = trust.read_lkg(trusted, spec.name)  # verified and bound, or refused
    base, tested = _test_commit(spec, opts, url, repo, commit)
    report = _outcome(spec, tested, store, key, repo, lkg)
    record_verdict(
        base,
        records.dist_dir(opts.dist_root, base.name),
        Verdict("cpu", "nightly", report.status),
        cache=opts.cache,
        store=opts.store,
        signing=opts.signing_key,
    )
    trust.write_state(
        store,
        spec.name,
        schedule.after_run(state, now, passed=not report.failing, commit=commit),
        key,
    )
    write_json(records.dist_dir(opts.dist_root, base.name) / REPORT, report.to_json())
    return report


def _test_commit(
    spec: Spec, opts: Options, url: str, repo: Path, commit: str
) -> tuple[Spec, NightlyReport]:
    """The plugin's tests on the core at `commit` and its manifest: the derived spec, the report."""
    dist = records.dist_dir(opts.dist_root, spec.name)
    records.build_record(
        dist, records.BUILD_PLUGIN, records.producer(records.BUILD_PLUGIN, spec.path)
    )
    inputs = Inputs(spec, opts.cache, opts.plugin_source)
    epoch = git.commit_time(repo, commit)
    base = commit_spec(spec, url, commit, epoch, opts.cache, SUFFIX)
    env = pairing_env(
        lambda _fetcher: (base, git.checkout(repo, commit, opts.cache)),
        title=f"nightly {commit[:12]}",
        cache=opts.cache,
        dist=dist,
        plugin=inputs.plugin,
        dist_root=opts.dist_root,
    )
    with opts.cache.scratch("nightly-") as tmp:
        run = pt.run_in_env(env, inputs.plugin.root, pt.settings_for(base), tmp / "junit.xml")
        failing, errors = run.failing, first_error_lines(tmp / "junit.xml")
    from vllm_plugin_release.stages.manifest import build_for_spec

    built = build_for_spec(
        base, signing_key=opts.signing_key, dist_root=opts.dist_root, cache=opts.cache
    )
    report = NightlyReport(
        "fail" if failing else "pass",
        pairing=spec.name,
        core=CoreRef(url, opts.ref, commit),
        plugin_commit=built.manifest.plugin.commit,
        manifest=built.manifest.name,
        failing=tuple(failing),
        errors={t: tuple(errors.get(t, [])) for t in failing},
    )
    return base, report


def render_text(report: NightlyReport) -> str:
    """The report for a terminal or a job summary."""
    if report.status == "skipped":
        return f"nightly: skipped ({report.reason})"
    core = report.core
    assert core is not None
    lines = [f"nightly {report.pairing}: {report.status} on {core.ref} {core.commit}"]
    if report.status == "pass":
        lines.append(f"last-known-good core commit moved to {core.commit}")
        return "\n".join(lines)
    lines.append(f"{len(report.failing)} plugin test(s) fail:")
    for test in report.failing:
        lines.append(f"  {test}")
        lines += [f"      {line}" for line in report.errors.get(test, ())]
    since = report.since
    if since is not None and since.commits is not None and since.last_known_good:
        lines.append(
            f"{since.commits} core commit(s) since the last-known-good "
            f"{since.last_known_good[:12]}:"
        )
        lines += [f"  {s}" for s in since.subjects or ()]
    if report.bisect:
        lines.append(f"find the breaking commit: {report.bisect}")
    return "\n".join(lines)
