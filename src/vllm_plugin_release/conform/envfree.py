"""Conformance without a pairing environment: what still runs when the spec's Python cannot.

A pairing is certified for the Python its vendor runtime loads (`[build] python`, one
of `[runtime] python`). On a machine with no such interpreter (and no image carrying
it), build-core, build-plugin and env stop with exit 3 naming what is missing
(`PythonUnavailable`). The checks that need no pairing environment still run here:
those that do not need `env` (`CheckDef.needs`: cadence, isolation on the verified
core source tree, pinning, hardware_docs for a spec with a hardware part), and what
a check that needs it can say without it (`CheckDef.without_env`: api diffs the
pinned core's recorded contract, buildspec/contracts/vllm-VERSION-openai.json, when
there is one). Every other check
that needs the environment is `deferred` with that reason, and the verdict is `lab`:
the pairing's environment was never checked, so it is never pilot or fleet. The
scorecard is written as usual, with a `blocked` section.
"""

from __future__ import annotations

from typing import Any

from vllm_plugin_release.conform import cardread, registry
from vllm_plugin_release.conform.context import Context
from vllm_plugin_release.conform.result import CheckResult, Evidence
from vllm_plugin_release.conform.scorecard import scorecard, utc_day
from vllm_plugin_release.conform.scorecard_render import write_card
from vllm_plugin_release.conform.suite import (
    CHECK_NAMES,
    conform_cached,
    not_run_here,
    run_checks,
    verdict_line,
)
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.errors import PythonUnavailable


def env_free(name: str) -> bool:
    """True for a check that needs nothing of the pairing environment (`CheckDef.needs`)."""
    return "env" not in registry.BY_NAME[name].needs


def blocker(ctx: Context) -> PythonUnavailable | None:
    """Why the pairing's environment cannot be made here: before build-core ran (no
    build-core.json), the spec's Python is looked for on the spec's runner. None when it
    is there, or when build-core already ran (the usual records then tell what is next)."""
    if (ctx.dist / records.BUILD_CORE).exists():
        return None
    from vllm_plugin_release.stages.wheelbuild import runner_for

    try:
        with runner_for(ctx.spec, ctx.cache) as runner:
            runner.require_python(ctx.spec.build.python)
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


def conform_env_free(ctx: Context, blocked: PythonUnavailable) -> cardread.Scorecard:
    """Run the checks that need no pairing environment, defer the others with `blocked`'s
    reason, write the scorecard (verdict lab) and return it (typed)."""
    from vllm_plugin_release import __version__

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
            "tool": {"name": "vllm-plugin-release", "version": __version__},
        },
        not_run=not_run_here(ctx.runner),
        blocked={"reason": blocked.message, "hint": blocked.hint or ""},
    )
    write_card(ctx.dist, card)
    read = cardread.parse(card, str(ctx.dist / records.SCORECARD))
    progress.info(verdict_line(read, ctx.dist) + " (only the checks that need no environment)")
    return read


def conform_here(ctx: Context, *, force: bool = False) -> cardread.Scorecard:
    """`vpr conform`: every check (cached), or, when the pairing's environment cannot be
    made here, the env-free checks and their scorecard, then PythonUnavailable (exit 3)."""
    blocked = blocker(ctx)
    if blocked is None:
        card = conform_cached(ctx, force=force)
        progress.info(verdict_line(card, ctx.dist))
        return card
    conform_env_free(ctx, blocked)
    raise blocked
