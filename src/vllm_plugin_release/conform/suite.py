"""`vpr conform` / `vpr check NAME`: run the checks against one pairing, write the scorecard.

Every check gets the same context (the spec, the verified sources, the pairing
environment; `conform/context.py`) and returns a CheckResult; which checks exist is
`conform/registry.py`. A check that cannot run because of an
outside failure (network, engine) is `deferred` with the reason, never `pass`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vllm_plugin_release.conform import api, registry
from vllm_plugin_release.conform.context import Context
from vllm_plugin_release.conform.result import CheckResult, Evidence
from vllm_plugin_release.conform.scorecard import scorecard, to_html, to_markdown
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.cache import atomic_write_text, key_of, sha256_file, write_json
from vllm_plugin_release.core.errors import BadInput, OutsideFailure

CHECK_NAMES = registry.SUITE


def run_check(ctx: Context, name: str) -> CheckResult:
    check = registry.BY_NAME.get(name)
    if check is None or check.run is None:
        raise BadInput(f"unknown check {name!r}; expected one of: {', '.join(CHECK_NAMES)}")
    try:
        return check.run(ctx)
    except OutsideFailure as exc:
        return CheckResult(
            name,
            "deferred",
            f"could not run: {exc.message}",
            [Evidence(note=str(exc), source="outside failure")],
        )


def pairing_summary(ctx: Context) -> dict[str, Any]:
    core = ctx.record(records.BUILD_CORE)
    plugin = ctx.record(records.BUILD_PLUGIN)
    return {
        "name": ctx.spec.name,
        "core": f"{core['core']['name']} {core['core']['version']}",
        "core_wheel_sha256": core["wheel"]["sha256"],
        "plugin": f"{plugin['plugin']['name']} {plugin['plugin']['version']}"
        f" @ {(plugin['plugin'].get('commit') or '')[:12]}",
        "plugin_wheel_sha256": plugin["wheel"]["sha256"],
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
CONFORM_RECIPE = 3  # 3: no run-specific timings, paths or times in the scorecard


def conform_key(ctx: Context) -> str:
    """Everything a scorecard depends on. The UTC day is an input because cadence asks the
    index which releases exist: a cached verdict never outlives the day it was made."""
    import datetime

    from vllm_plugin_release import __version__

    core = ctx.record(records.BUILD_CORE)
    plugin = ctx.record(records.BUILD_PLUGIN)
    contract = api.api_config(ctx.spec)["contract"]  # the spec's, else the default one
    contract_path = ctx.spec.resolve(contract)
    env = ctx.env
    return key_of(
        {
            "recipe": CONFORM_RECIPE,
            "pipeline": __version__,
            "spec": ctx.spec.raw,
            "runner": ctx.runner,
            "core": core["wheel"]["sha256"],
            "plugin": [plugin["wheel"]["sha256"], plugin["plugin"].get("commit")],
            "env": [env.get("lock_sha256"), env.get("runtime"), env.get("checks")],
            "contract": sha256_file(contract_path) if contract_path.exists() else None,
            "day": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        }
    )


def conform_cached(ctx: Context, *, force: bool = False) -> dict[str, Any]:
    """`conform`, reusing the stage result when none of its inputs changed."""
    import shutil

    stage = ctx.cache.stage_dir("conform", conform_key(ctx))
    if not force and (stage / records.SCORECARD).exists():
        for name in OUTPUTS:
            if (stage / name).exists():
                shutil.copy2(stage / name, ctx.dist / name)
        card = json.loads((stage / records.SCORECARD).read_text())
        progress.info(f"conform: cached result reused (verdict {card['verdict']})")
        return card
    card = conform(ctx)
    with ctx.cache.publish_dir(stage) as work:
        for name in OUTPUTS:
            if (ctx.dist / name).exists():
                shutil.copy2(ctx.dist / name, work / name)
    return card


def conform(ctx: Context, names: tuple[str, ...] = CHECK_NAMES) -> dict[str, Any]:
    results = []
    for name in names:
        with progress.status(f"conform: {name}"):
            result = run_check(ctx, name)
        progress.info(f"conform: {result.status:>8}  {name}: {result.summary}")
        results.append(result)
    card = scorecard(results, runner=ctx.runner, pairing=pairing_summary(ctx))
    write_json(ctx.dist / records.SCORECARD, card)
    atomic_write_text(ctx.dist / records.SCORECARD_MD, to_markdown(card))
    atomic_write_text(ctx.dist / records.SCORECARD_HTML, to_html(card))
    return card


def verdict_line(card: dict[str, Any], dist: Path) -> str:
    """`conform: verdict pilot (dist/NAME/scorecard.md); 6 pass, 1 warn`."""
    counts = ", ".join(f"{n} {s}" for s, n in card["summary"].items() if n)
    return f"conform: verdict {card['verdict']} ({dist / records.SCORECARD_MD}); {counts}"


def dumps(result: CheckResult) -> str:
    return json.dumps(result.to_json(), indent=2, sort_keys=True)
