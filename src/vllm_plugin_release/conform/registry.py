"""The one list of conformance checks, and the buildspec schema assembled from it.

Each check is a folder, `conform/checks/<name>/`, whose `__init__.py` exports one
`CheckDef` (`conform/checkdef.py`): what the check is called, what it checks (one line,
shown by `vpr conform --help`, `vpr check --help` and docs/conformance.md), which
`[conformance.*]` tables it reads and their JSON Schema (its `schema.py`; assembled into
the buildspec schema, so `vpr spec check`, `vpr spec schema` and docs/buildspec.md
follow), where it runs, which inputs of the `Context` it reads, what it needs (the
pairing env, the vendor runtime, the network, a device) and the function that runs it
(its `check.py`). Analysis that several checks (or commands) share is `conform/lib/`.

Adding a check: one folder under `conform/checks/`, one entry here, one test; then
regenerate the schema the package ships (`vpr spec schema > src/vllm_plugin_release/
schemas/buildspec.schema.json`, which `spec.load.load_spec` validates against) and the
docs (`vpr check --list` between the markers of docs/conformance.md).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.buildspec.schema import full_schema
from vllm_plugin_release.conform.checkdef import NEEDS, CheckDef
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

RUNNERS = ("cpu", "hardware")

# The checks in scorecard order: each is the `CHECK` of its folder under conform/checks/.
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


def set_spec_value(path: str | Path, dotted_key: str, raw_value: str) -> str:
    """`vpr spec set`: edit one key, refusing a result that does not validate (against the
    shipped schema, which a unit test keeps equal to `spec_schema()`)."""
    from vllm_plugin_release.buildspec import load

    return load.set_value(path, dotted_key, raw_value)


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
