"""`vpr nightly`: the plugin against a core git commit (vLLM main), with a last-known-good
pointer and a schedule that backs off while it fails.

One run: skip unless due (`core.schedule`: every 8 h while passing, 24 h while failing;
`--force` runs anyway); resolve `--ref` (default main) in the core repository; build the
empty-target core at that commit, the cpu pairing environment with the plugin wheel built
for the spec, and run the plugin's cpu tests; write a manifest for the pairing under the
name NAME-nightly (never published: `vpr publish` refuses it) and a ledger entry of kind
`nightly` (verdict pass|fail). On pass the store's signed last-known-good pointer moves to
the commit; on failure the report names the failing tests, their first error lines, the
commits since the last-known-good one and the `vpr bisect` command that finds the break.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_plugin_release.buildspec.model import GitSource, Spec
from vllm_plugin_release.conform.checks.plugin_tests import check as pt
from vllm_plugin_release.core import progress, records, schedule
from vllm_plugin_release.core.bisect import first_error_lines
from vllm_plugin_release.core.cache import Cache, write_json
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges import corehistory, ledgerstore
from vllm_plugin_release.edges.store import open_store
from vllm_plugin_release.edges.trust import TRUST_DIR, Trusted
from vllm_plugin_release.flows.baseline import commit_spec
from vllm_plugin_release.flows.ledger import Verdict, now_utc, record_verdict, signing_key
from vllm_plugin_release.flows.pairing_graph import pairing_python
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


def _core_url(spec: Spec, repo: str | None) -> str:
    if repo:
        return repo
    if isinstance(spec.core.source, GitSource):
        return spec.core.source.url
    raise BadInput(
        f"{spec.path}: the core source is an sdist; a nightly needs the core's git repository",
        hint="pass --repo URL (e.g. https://github.com/vllm-project/vllm)",
    )


def _tests(spec: Spec, python: Path, root: Path, cache: Cache) -> tuple[list[str], dict]:
    cfg = pt.settings_for(spec)
    with cache.scratch("nightly-") as tmp:
        run = pt.run_tests(python, root, "cpu", cfg, tmp / "junit.xml", spec.runtime.get("module"))
        return run.failing, first_error_lines(tmp / "junit.xml")


def _since(repo: Path, lkg: dict[str, Any] | None, commit: str, url: str) -> dict[str, Any]:
    """The commits since the last-known-good one (what a bisection would search)."""
    if not lkg or not lkg.get("core_commit"):
        return {"last_known_good": None, "commits": None}
    good = str(lkg["core_commit"])
    try:
        between = corehistory.commits_between(repo, good, commit, url)[1:]
    except BadInput:
        return {"last_known_good": good, "commits": None}
    return {
        "last_known_good": good,
        "commits": len(between),
        "subjects": [f"{c[:12]} {corehistory.subject(repo, c)}" for c in between[-20:]],
    }


def _outcome(
    spec: Spec, report: dict[str, Any], store: Any, key: Any, repo: Path, lkg: dict | None
) -> None:
    """Pass: move the signed last-known-good pointer. Fail: say what broke since it."""
    core = report["core"]
    if report["status"] == "pass":
        pointer = {
            "pairing": spec.name,
            "core_url": core["url"],
            "core_commit": core["commit"],
            "plugin_commit": report["plugin_commit"],
            "time": now_utc(),
        }
        report["last_known_good"] = str(ledgerstore.write_lkg(store, spec.name, pointer, key))
        return
    report["since_last_known_good"] = _since(repo, lkg, core["commit"], core["url"])
    good = (lkg or {}).get("core_commit")
    if good:
        report["bisect"] = (
            f"vpr bisect --spec {spec.path} --repo {core['url']} --good {good} "
            f"--bad {core['commit']}"
        )


def _trusted(store: Any, key: Any, cache: Cache, now: dt.datetime) -> Trusted:
    """The store read through its signed head with the manifest key's public half; its
    expiry not checked (this run signs the next head), a missing head read as no state."""
    memory = cache.root / TRUST_DIR
    return Trusted(store, key.public_key(), memory=memory, fresh=False, required=False, now=now)


def nightly(spec: Spec, opts: Options) -> dict[str, Any]:
    """One nightly run (or a skip); the report (also dist/NAME-nightly/nightly.json)."""
    if not spec.plugin:
        raise BadInput(f"{spec.path}: no [plugin]; the nightly runs the plugin's tests")
    url = _core_url(spec, opts.repo)
    store = open_store(resolve_targets(spec, None, opts.store, opts.cache.root)[1])
    key = signing_key(spec, opts.cache, opts.signing_key)
    now = opts.now or dt.datetime.now(dt.timezone.utc)
    trusted = _trusted(store, key, opts.cache, now)
    state, run_now, why = schedule.due_now(
        ledgerstore.read_state(trusted, spec.name),
        now,
        interval=opts.interval,
        backoff=opts.backoff,
    )
    if not run_now and not opts.force:
        progress.info(f"nightly: skipped ({why})")
        return {"status": "skipped", "reason": why}
    repo = corehistory.mirror(url, opts.cache)
    commit = corehistory.resolve(repo, opts.ref, "--ref", url)
    lkg = ledgerstore.read_lkg(trusted, spec.name)  # verified and bound, or refused
    base, report = _test_commit(spec, opts, url, repo, commit)
    _outcome(spec, report, store, key, repo, lkg)
    record_verdict(
        base,
        records.dist_dir(opts.dist_root, base.name),
        Verdict("cpu", "nightly", report["status"]),
        cache=opts.cache,
        store=opts.store,
        signing=opts.signing_key,
    )
    ledgerstore.write_state(
        store,
        spec.name,
        schedule.after_run(state, now, passed=not report["failing"], commit=commit).to_json(),
        key,
    )
    write_json(records.dist_dir(opts.dist_root, base.name) / REPORT, report)
    return report


def _test_commit(
    spec: Spec, opts: Options, url: str, repo: Path, commit: str
) -> tuple[Spec, dict[str, Any]]:
    """The plugin's tests on the core at `commit` (a pairing environment walked like the
    baseline's) and its manifest: the derived spec and the run's report."""
    dist = records.dist_dir(opts.dist_root, spec.name)
    records.build_record(
        dist, records.BUILD_PLUGIN, records.producer(records.BUILD_PLUGIN, spec.path)
    )
    inputs = Inputs(spec, opts.cache, opts.plugin_source)
    epoch = corehistory.commit_time(repo, commit)
    base = commit_spec(spec, url, commit, epoch, opts.cache, SUFFIX)
    python = pairing_python(
        lambda _fetcher: (base, corehistory.checkout(repo, commit, opts.cache)),
        title=f"nightly {commit[:12]}",
        cache=opts.cache,
        dist=dist,
        plugin=inputs.plugin,
        dist_root=opts.dist_root,
    )
    failing, errors = _tests(base, python, inputs.plugin.root, opts.cache)
    from vllm_plugin_release.stages.manifest import build_for_spec

    built = build_for_spec(
        base, signing_key=opts.signing_key, dist_root=opts.dist_root, cache=opts.cache
    )
    report: dict[str, Any] = {
        "status": "fail" if failing else "pass",
        "pairing": spec.name,
        "core": {"url": url, "ref": opts.ref, "commit": commit},
        "plugin_commit": built.manifest.plugin.commit,
        "manifest": built.manifest.name,
        "failing": failing,
        "errors": {t: errors.get(t, []) for t in failing},
    }
    return base, report


def render_text(report: dict[str, Any]) -> str:
    """The report for a terminal or a job summary."""
    if report["status"] == "skipped":
        return f"nightly: skipped ({report['reason']})"
    core = report["core"]
    lines = [f"nightly {report['pairing']}: {report['status']} on {core['ref']} {core['commit']}"]
    if report["status"] == "pass":
        lines.append(f"last-known-good core commit moved to {core['commit']}")
        return "\n".join(lines)
    lines.append(f"{len(report['failing'])} plugin test(s) fail:")
    for test in report["failing"]:
        lines.append(f"  {test}")
        lines += [f"      {line}" for line in report["errors"].get(test, [])]
    since = report.get("since_last_known_good") or {}
    if since.get("commits") is not None:
        lines.append(
            f"{since['commits']} core commit(s) since the last-known-good "
            f"{since['last_known_good'][:12]}:"
        )
        lines += [f"  {s}" for s in since.get("subjects", [])]
    if report.get("bisect"):
        lines.append(f"find the breaking commit: {report['bisect']}")
    return "\n".join(lines)
