"""`vpr conform` / `vpr check NAME`: run the checks against one pairing and write the scorecard;
where the pairing environment cannot be made, the checks that need none (verdict lab)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, NamedTuple

from vllm_plugin_release import __version__
from vllm_plugin_release.conform import CheckResult, Context, Evidence, registry
from vllm_plugin_release.conform.checks import api
from vllm_plugin_release.conform.scorecard import ICONS, scorecard, utc_day, write_card
from vllm_plugin_release.core import cardrecord, progress, records
from vllm_plugin_release.core.cache import key_of, sha256_file
from vllm_plugin_release.core.errors import BadInput, JobFailed, OutsideFailure, PythonUnavailable
from vllm_plugin_release.edges import envrun
from vllm_plugin_release.replay import config as replay_config
from vllm_plugin_release.replay.model import Headline, headline

CHECK_NAMES = registry.SUITE
TOOL = {"name": "vllm-plugin-release", "version": __version__}


def run_check(ctx: Context, name: str) -> CheckResult:
    check = registry.BY_NAME.get(name)
    if check is None or check.run is None:
        raise BadInput(f"unknown check {name!r}; expected one of: {', '.join(CHECK_NAMES)}")
    try:
        return check.run(ctx)
    except JobFailed as exc:
        return job_failed(name, exc)
    except OutsideFailure as exc:
        return CheckResult(
            name,
            "deferred",
            f"could not run: {exc.message}",
            [Evidence(note=str(exc), source="outside failure")],
        )


def job_failed(name: str, exc: JobFailed) -> CheckResult:
    """`fail` for a check whose job in the pairing environment died, answered garbage or ran
    past its time: the plugin's code runs there, so nothing was shown to work."""
    headline = exc.message.splitlines()[0].rstrip(":")
    last = next((line.strip() for line in reversed(exc.log.splitlines()) if line.strip()), "")
    summary = f"its job in the pairing environment failed: {headline}"
    summary += f" (last output: {last[:300]})" if last else " (no output)"
    evidence = [Evidence(note=headline, source="env")]
    evidence += [
        Evidence(note=f"output: {line}", source="env") for line in exc.log.splitlines() if line
    ]
    return CheckResult(name, "fail", summary, evidence, details={"job_failed": headline})


class ReplayFacts(NamedTuple):
    """What the scorecard states of replay.json: its headline and its plots' file names."""

    headline: Headline
    plots: tuple[str, ...]


def parse_replay_facts(data: Any, where: str | Path) -> ReplayFacts:
    """replay.json's headline and `plots`, checked; BadInput naming `where` and the key."""
    found = headline(data, where)
    plots = data.get("plots") if isinstance(data, dict) else None
    if plots and (not isinstance(plots, list) or not all(isinstance(p, str) for p in plots)):
        raise BadInput(
            f"{where}: plots is not a list of file names ({repr(plots)[:60]})",
            hint="run `vpr replay` again; the record is malformed",
        )
    return ReplayFacts(found, tuple(plots or ()))


def card_facts(ctx: Context, day: str) -> dict[str, Any]:
    """What the scorecard states beside the checks, from the records in dist/NAME."""
    from vllm_plugin_release.stages.manifest import pairing_id_of

    core, plugin = ctx.build(records.BUILD_CORE), ctx.build(records.BUILD_PLUGIN)
    runtime: dict[str, Any] = {}
    if (ctx.dist / records.ENV).exists():
        rt = records.env_record(ctx.dist, ctx.spec.path).runtime  # bounded, checked
        named = (("name", rt.name), ("status", rt.status), ("reason", rt.reason))
        runtime = {k: v for k, v in named if v}
    replay_path = ctx.dist / records.REPLAY
    replay = None
    if replay_path.exists() and replay_config.configured(ctx.spec):
        read = records.read_with(  # bounded, checked
            ctx.dist, records.REPLAY, lambda data: parse_replay_facts(data, replay_path)
        )
        replay = {**read.headline.to_json(), "plots": list(read.plots)}
    return {
        "pairing_id": pairing_id_of(ctx.spec, core, plugin),
        "wheels": [
            {"role": role, "filename": rec.wheel.filename, "sha256": rec.wheel.sha256}
            for role, rec in (("core", core), ("plugin", plugin))
        ],
        "runtime": runtime or None,
        "certified_on": day,
        "tool": dict(TOOL),
        "replay": replay,
    }


def not_run_here(runner: str) -> list[tuple[str, str]]:
    """Checks `vpr conform` never runs (the hardware runner's live part), with why."""
    if runner == "hardware":
        why = "not run yet: `vpr hardware live` adds it after `vpr conform` ({})"
    else:
        why = "runs only on the hardware runner ({}); this run used the " + runner + " runner"
    return [(c.name, why.format(c.summary)) for c in registry.CHECKS if c.run is None]


def pairing_summary(ctx: Context) -> dict[str, Any]:
    core, plugin = ctx.build(records.BUILD_CORE), ctx.build(records.BUILD_PLUGIN)
    return {
        "name": ctx.spec.name,
        "core": f"{core.name} {core.version}",
        "core_wheel_sha256": core.wheel.sha256,
        "plugin": f"{plugin.name} {plugin.version} @ {(plugin.commit or '')[:12]}",
        "plugin_wheel_sha256": plugin.wheel.sha256,
    }


# Files `conform` writes into dist/NAME; a cached run restores exactly these.
OUTPUTS = (
    records.SCORECARD,
    records.SCORECARD_MD,
    records.SCORECARD_HTML,
    records.PLUGIN_TESTS,
    records.REPLAY,
    records.REPLAY_TIMING,
    *records.REPLAY_PLOTS,
)
# Bumped whenever what conform writes changes, so no older cached scorecard is reused.
CONFORM_RECIPE = 7


def conform_key(ctx: Context) -> str:
    """Everything a scorecard depends on. The UTC day is an input because cadence asks the
    index which releases exist: a cached verdict never outlives the day it was made."""
    core, plugin = ctx.build(records.BUILD_CORE), ctx.build(records.BUILD_PLUGIN)
    contract = api.api_config(ctx.spec).contract  # the spec's, else the default one
    contract_path = ctx.spec.resolve(contract)
    env = ctx.env
    return key_of(
        {
            "recipe": CONFORM_RECIPE,
            "pipeline": __version__,
            "spec": ctx.spec.raw,
            "runner": ctx.runner,
            "core": core.wheel.sha256,
            "plugin": [plugin.wheel.sha256, plugin.commit],
            "env": [env.lock_sha256, env.runtime.to_json(), [c.to_json() for c in env.checks]],
            # Where the in-env parts run (this machine or a pinned image): a result made
            # on one is never reported as made on the other.
            "env_backend": None if env.backend is None else env.backend.to_json(),
            "contract": sha256_file(contract_path) if contract_path.exists() else None,
            "day": utc_day(),
        }
    )


def conform_cached(ctx: Context, *, force: bool = False) -> cardrecord.Scorecard:
    """`conform`, reusing the stage result when no input changed; the scorecard, typed."""
    import shutil

    stage = ctx.cache.stage_dir("conform", conform_key(ctx))
    cached = None if force else _cached_card(stage)
    if cached is not None:
        for name in OUTPUTS:
            if (stage / name).exists():
                shutil.copy2(stage / name, ctx.dist / name)
        card = cached.to_json()
        write_card(ctx.dist, card)  # the pages drawn by this version from the cached data
        progress.info(f"conform: cached result reused (verdict {cached.verdict})")
        return cached
    card = conform(ctx)
    with ctx.cache.publish_dir(stage) as work:
        for name in OUTPUTS:
            if (ctx.dist / name).exists():
                shutil.copy2(ctx.dist / name, work / name)
    return cardrecord.parse(card, str(ctx.dist / records.SCORECARD))


def _cached_card(stage: Path) -> cardrecord.Scorecard | None:
    """The cached scorecard for these inputs; None when absent or unreadable (run again)."""
    if not (stage / records.SCORECARD).exists():
        return None
    try:
        return cardrecord.read(stage)
    except BadInput as exc:
        progress.info(f"conform: the cached result is not used ({exc.message}); checking again")
        return None


# Checks that start an interpreter in the pairing environment: started first, longest
# first, so the short ones fill the other cores meanwhile (the results keep suite order).
LONG_FIRST = ("workload", "plugin_tests", "api", "scheduler")


def start_order(names: tuple[str, ...]) -> list[str]:
    """`names` in the order they start: LONG_FIRST's, in its order, then the suite's."""
    return sorted(
        names,
        key=lambda n: (LONG_FIRST.index(n) if n in LONG_FIRST else len(LONG_FIRST), names.index(n)),
    )


def parallelism(count: int) -> int:
    """How many checks run at once: the cores this process may use, at most `count`."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(count, cores or 1))


def run_checks(ctx: Context, names: tuple[str, ...]) -> list[CheckResult]:
    """Run the checks side by side; results (each printed once known) in `names` order."""
    from concurrent.futures import ThreadPoolExecutor

    workers = parallelism(len(names))
    if workers > 1:
        progress.info(f"conform: {len(names)} checks, {workers} at a time")
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vpr-check")
    try:
        futures = {name: pool.submit(run_check, ctx, name) for name in start_order(names)}
        results = []
        for name in names:
            result = futures[name].result()
            progress.info(f"conform: {result.status:>8}  {name}: {result.summary}")
            results.append(result)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # checks not started never start
        raise
    pool.shutdown()
    return results


# Checks whose in-env work (`edges/envrun.run_in_env`) can share the warm worker.
IN_WORKER = ("api", "scheduler", "workload")


def _warm(ctx: Context, names: tuple[str, ...]) -> contextlib.AbstractContextManager[Any]:
    """The pairing env's warm worker, started before the checks, when one would use it."""
    if not set(names) & set(IN_WORKER):
        return contextlib.nullcontext()
    try:
        python = ctx.env.python
    except BadInput:
        return contextlib.nullcontext()
    return envrun.warm(python)


def conform(ctx: Context, names: tuple[str, ...] = CHECK_NAMES) -> dict[str, Any]:
    not_run = not_run_here(ctx.runner) if names == CHECK_NAMES else []
    names = registry.applicable(ctx.spec, names)
    with _warm(ctx, names):
        results = run_checks(ctx, names)
    with contextlib.suppress(BadInput):  # no env record: no in-env check ran
        envrun.keep_bytecode(ctx.env.python)
    card = scorecard(
        results,
        runner=ctx.runner,
        pairing=pairing_summary(ctx),
        facts=card_facts(ctx, utc_day()),
        not_run=not_run,
    )
    write_card(ctx.dist, card)
    return card


def verdict_line(card: cardrecord.Scorecard, dist: Path) -> str:
    """`conform: verdict pilot (dist/NAME/scorecard.md); 6 pass, 1 warn`."""
    summary = {s: sum(1 for r in card.results if r.status == s) for s in ICONS}
    counts = ", ".join(f"{n} {s}" for s, n in summary.items() if n)
    return f"conform: verdict {card.verdict} ({dist / records.SCORECARD_MD}); {counts}"


def dumps(result: CheckResult) -> str:
    return json.dumps(result.to_json(), indent=2, sort_keys=True)


def env_free(name: str) -> bool:
    """True for a check that needs nothing of the pairing environment (`CheckDef.needs`)."""
    return "env" not in registry.BY_NAME[name].needs


def blocker(ctx: Context) -> PythonUnavailable | None:
    """Why the pairing's environment cannot be made here: before build-core ran, the spec's
    Python is looked for on the spec's runner. None when it is there, or build-core ran."""
    if (ctx.dist / records.BUILD_CORE).exists():
        return None
    from vllm_plugin_release.stages.wheelbuild import runner_for

    try:
        with runner_for(ctx.spec, ctx.cache) as runner:
            runner.interpreter(ctx.spec.build.python)
    except PythonUnavailable as exc:
        return exc
    return None


def _pairing(ctx: Context) -> dict[str, Any]:
    """The pairing as the spec names it (no wheels: none was built)."""
    plugin = ctx.spec.plugin
    commit = (plugin.source.commit if plugin else None) or ""
    return {
        "name": ctx.spec.name,
        "core": f"{ctx.spec.core.name} {ctx.spec.core.version}",
        "core_wheel_sha256": None,
        "plugin": (plugin.name if plugin else "?") + (f" @ {commit[:12]}" if commit else ""),
        "plugin_wheel_sha256": None,
    }


def conform_env_free(ctx: Context, blocked: PythonUnavailable) -> cardrecord.Scorecard:
    """Run the env-free checks, defer the others, write the scorecard (lab) and return it."""
    suite = registry.applicable(ctx.spec, CHECK_NAMES)  # as `vpr conform` runs them
    ran = {r.name: r for r in run_checks(ctx, tuple(n for n in suite if env_free(n)))}
    reason = f"needs the pairing environment, which cannot be made here: {blocked.message}"
    results = []
    for name in suite:
        result = ran.get(name)
        fallback = registry.BY_NAME[name].without_env
        if result is None and fallback is not None:
            result = fallback(ctx)  # e.g. api: the core's recorded contract
            if result is not None:
                progress.info(f"conform: {result.status:>8}  {name}: {result.summary}")
        if result is None:
            result = CheckResult(
                name,
                "deferred",
                reason,
                [Evidence(note=blocked.hint or blocked.message, source="outside failure")],
            )
            progress.info(f"conform: {'deferred':>8}  {name}: {reason}")
        results.append(result)
    card = scorecard(
        results,
        runner=ctx.runner,
        pairing=_pairing(ctx),
        facts={
            "certified_on": utc_day(),
            "tool": dict(TOOL),
        },
        not_run=not_run_here(ctx.runner),
        blocked={"reason": blocked.message, "hint": blocked.hint or ""},
    )
    write_card(ctx.dist, card)
    read = cardrecord.parse(card, str(ctx.dist / records.SCORECARD))
    progress.info(verdict_line(read, ctx.dist) + " (only the checks that need no environment)")
    return read


def conform_here(ctx: Context, *, force: bool = False) -> cardrecord.Scorecard:
    """`vpr conform`: every check (cached), or, when the pairing's environment cannot be
    made here, the env-free checks and their scorecard, then PythonUnavailable (exit 3)."""
    blocked = blocker(ctx)
    if blocked is None:
        card = conform_cached(ctx, force=force)
        progress.info(verdict_line(card, ctx.dist))
        return card
    conform_env_free(ctx, blocked)
    raise blocked
