"""The one list of conformance checks, and the buildspec schema assembled from it.

Each entry says what the check is called, what it checks (one line, shown by
`vpr conform --help`, `vpr check --help` and docs/conformance.md), which
`[conformance.*]` tables it reads and their JSON Schema (assembled into the buildspec
schema, so `vpr spec check`, `vpr spec schema` and docs/buildspec.md follow), where
it runs, which inputs of the `Context` it reads, and the function that runs it.

Adding a check: one module under `conform/`, one entry here, one test; then regenerate
the schema the package ships (`vpr spec schema > src/vllm_plugin_release/schemas/
buildspec.schema.json`, which `spec.load.load_spec` validates against) and the docs.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.buildspec.schema import full_schema
from vllm_plugin_release.conform import api, environment, hardwaredocs, plugin_tests
from vllm_plugin_release.conform.checkdef import NEEDS, CheckDef
from vllm_plugin_release.conform.checks import cadence as cadence_check
from vllm_plugin_release.conform.checks import isolation as isolation_check
from vllm_plugin_release.conform.checks import pinning as pinning_check
from vllm_plugin_release.conform.checks import scheduler as scheduler_check
from vllm_plugin_release.conform.checks import workload as workload_check
from vllm_plugin_release.conform.lib import hardwaresettings

RUNNERS = ("cpu", "hardware")


CHECKS: tuple[CheckDef, ...] = (
    cadence_check.CHECK,
    isolation_check.CHECK,
    pinning_check.CHECK,
    scheduler_check.CHECK,
    workload_check.CHECK,
    CheckDef(
        "api",
        "the served OpenAPI surface of the pairing against a client contract",
        lambda ctx: (
            api.vllm_unimportable(ctx.env)
            or api.check(
                ctx.spec,
                ctx.python,
                # Same precedence as `vpr api-contract`: the spec's platform_class, then the env's.
                ctx.spec.conformance.get("api", {}).get("platform_class") or ctx.platform_class,
            )
        ),
        {"api": api.API_SCHEMA},
        ("env",),
        needs=("env",),
        # No env: the pinned core's recorded contract against the client contract.
        without_env=lambda ctx: api.check_recorded(ctx.spec),
    ),
    CheckDef(
        "environment",
        "the pairing environment's own checks (vpr env), summarised",
        environment.check,
        {},
        ("env",),
        needs=("env", "runtime"),
    ),
    CheckDef(
        "plugin_tests",
        "the plugin's own test suite in the pairing environment",
        plugin_tests.run,
        {"plugin_tests": plugin_tests.PLUGIN_TESTS_SCHEMA},
        ("plugin_root", "env"),
        needs=("env", "runtime"),
    ),
    CheckDef(
        "hardware_docs",
        "the spec's hardware expectations (parallelism, mesh variable, device nodes) against "
        "the plugin's docs [specs with a hardware part]",
        lambda ctx: hardwaredocs.check(ctx.spec, ctx.plugin_root),
        {"hardware": hardwaresettings.HARDWARE_SCHEMA},
        ("plugin_root",),
        applies=hardwaredocs.applies,
    ),
    CheckDef(
        "hardware",
        "the live part on the hardware runner: the parallelism probe and a mixed-load "
        "test against `vllm serve`",
        None,
        {"hardware": hardwaresettings.HARDWARE_SCHEMA},
        ("env",),
        needs=("env", "runtime", "device"),
        runner="hardware",
    ),
)

BY_NAME: Mapping[str, CheckDef] = {c.name: c for c in CHECKS}
# The checks `vpr conform` runs, in scorecard order.
SUITE: tuple[str, ...] = tuple(c.name for c in CHECKS if c.run is not None)


def applicable(spec: Spec, names: tuple[str, ...] = SUITE) -> tuple[str, ...]:
    """The checks of `names` that apply to `spec`, in order."""
    return tuple(
        n
        for n in names
        if BY_NAME[n].applies is None or BY_NAME[n].applies(spec)  # type: ignore[misc]
    )


def tables() -> dict[str, dict[str, Any]]:
    """Every `[conformance.*]` table's schema, in registry order."""
    out: dict[str, dict[str, Any]] = {}
    for check in CHECKS:
        out.update(check.tables)
    return out


@functools.cache
def spec_schema() -> dict[str, Any]:
    """The full buildspec JSON Schema (the same object on every call)."""
    return full_schema(tables())


def set_spec_value(path: str | Path, dotted_key: str, raw_value: str) -> str:
    """`vpr spec set`: edit one key, refusing a result that does not validate."""
    from vllm_plugin_release.buildspec import load

    return load.set_value(path, dotted_key, raw_value, spec_schema())


def _needs(c: CheckDef) -> str:
    return ", ".join(c.needs) or "nothing"


def help_lines() -> str:
    """One line per check, for argparse epilogs and the docs."""
    width = max(len(c.name) for c in CHECKS)
    return "\n".join(
        f"  {c.name:<{width}}  {c.summary}"
        + (f"  [needs: {_needs(c)}]" if c.needs else "")
        + ("  [hardware runner: vpr hardware-live]" if c.runner == "hardware" else "")
        for c in CHECKS
    )


def docs_table() -> str:
    """The checks-at-a-glance table of docs/conformance.md."""
    rows = [
        "| check | what it checks | spec tables | reads | needs | runs in |",
        "|---|---|---|---|---|---|",
    ]
    for c in CHECKS:
        spec_tables = ", ".join(f"`[conformance.{t}]`" for t in c.tables) or "none"
        where = "`vpr hardware-live`" if c.runner == "hardware" else "`vpr conform`"
        reads = ", ".join(c.inputs) or "nothing"
        rows.append(
            f"| `{c.name}` | {c.summary} | {spec_tables} | {reads} | {_needs(c)} | {where} |"
        )
    legend = "; ".join(f"{k}: {v}" for k, v in NEEDS.items())
    return "\n".join(rows) + f"\n\n`needs`: {legend}.\n"
