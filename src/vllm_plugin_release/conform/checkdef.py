"""The one shape of a conformance check: what `conform/checks/<name>/__init__.py` exports.

A check's folder holds its `check.py` (the run), its `schema.py` (the JSON Schema of the
`[conformance.*]` tables it reads) and, where it renders evidence of its own,
`evidence.py`; `conform/registry.py` lists the folders' `CheckDef`s in scorecard order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the spec module loads jsonschema: keep it off `vpr --help`
    from vllm_plugin_release.buildspec.model import Spec
    from vllm_plugin_release.conform.context import Context
    from vllm_plugin_release.conform.result import CheckResult

# What a check needs beyond the spec, the plugin's source and the verified core tree (which
# the flow fetches and hands in, `conform/context.py`); shown by `vpr check --help` and
# docs/conformance.md.
NEEDS: Mapping[str, str] = {
    "env": "the pairing environment (`vpr env`)",
    "runtime": "the vendor runtime (or its labelled stand-in) importable there; without it "
    "the parts that need it are deferred, never passed",
    "network": "the check itself reads from the network (a package index, a git remote)",
    "device": "an accelerator (only the hardware runner has one)",
}


@dataclass(frozen=True)
class CheckDef:
    name: str
    summary: str
    run: Callable[[Context], CheckResult] | None
    tables: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()
    # What it needs (keys of NEEDS); `env` exactly when it reads the env (`inputs`).
    needs: tuple[str, ...] = ()
    # "any": `vpr conform` runs it on every runner; "hardware": only the hardware
    # runner's live part produces it (`vpr hardware live`), never `vpr conform`.
    runner: str = "any"
    # A check that needs the pairing env: what it can say when no env can be made here
    # (`conform/envfree.py`); None from it (or no function) defers the check.
    without_env: Callable[[Context], CheckResult | None] | None = None
    # Whether `vpr conform` runs it for a spec (None: always); `vpr check NAME` always does.
    applies: Callable[[Spec], bool] | None = None

    def __post_init__(self) -> None:
        unknown = [n for n in self.needs if n not in NEEDS]
        if unknown:
            raise ValueError(f"check {self.name}: unknown needs {unknown}; known: {list(NEEDS)}")
        if ("env" in self.needs) != ("env" in self.inputs):
            raise ValueError(f"check {self.name}: needs 'env' exactly when it reads the env")
