"""The one list of conformance checks, in scorecard order (each the `CHECK` of its module in
`conform/checks/`), and what is assembled from it: the buildspec schema, help, docs table."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from vllm_plugin_release.buildspec.model import Spec, full_schema
from vllm_plugin_release.conform import NEEDS, CheckDef
from vllm_plugin_release.conform.checks import (
    api,
    cadence,
    environment,
    hardware,
    hardware_docs,
    isolation,
    pinning,
    plugin_tests,
    scheduler,
    workload,
)

# The checks in scorecard order.
CHECKS: tuple[CheckDef, ...] = (
    cadence.CHECK,
    isolation.CHECK,
    pinning.CHECK,
    scheduler.CHECK,
    workload.CHECK,
    api.CHECK,
    environment.CHECK,
    plugin_tests.CHECK,
    hardware_docs.CHECK,
    hardware.CHECK,
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


def _needs(c: CheckDef) -> str:
    return ", ".join(c.needs) or "nothing"


def help_lines() -> str:
    """One line per check, for argparse epilogs and the docs."""
    width = max(len(c.name) for c in CHECKS)
    return "\n".join(
        f"  {c.name:<{width}}  {c.summary}"
        + (f"  [needs: {_needs(c)}]" if c.needs else "")
        + ("  [hardware runner: vpr hardware live]" if c.runner == "hardware" else "")
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
        where = "`vpr hardware live`" if c.runner == "hardware" else "`vpr conform`"
        reads = ", ".join(c.inputs) or "nothing"
        rows.append(
            f"| `{c.name}` | {c.summary} | {spec_tables} | {reads} | {_needs(c)} | {where} |"
        )
    legend = "; ".join(f"{k}: {v}" for k, v in NEEDS.items())
    return "\n".join(rows) + f"\n\n`needs`: {legend}.\n"
