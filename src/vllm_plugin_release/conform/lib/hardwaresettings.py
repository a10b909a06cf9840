"""`[conformance.hardware]`: its schema and its settings (every vendor fact a spec key, the
defaults vendor-neutral), read by the `hardware`, `hardware_docs` and `workload` checks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core.errors import BadInput

if TYPE_CHECKING:  # the spec module loads jsonschema: keep it off `vpr --help`
    from vllm_plugin_release.buildspec.model import Spec


RANK_FLAGS = (
    "-tp",
    "--tensor-parallel-size",
    "-pp",
    "--pipeline-parallel-size",
    "-dp",
    "--data-parallel-size",
)
LABEL = re.compile(r"^[a-z0-9][a-z0-9-]*$")
DOCS_DEFAULT = ("README*", "docs/**/*", "examples/**/*")  # read when the spec names none
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def _positive(description: str, default: int) -> dict[str, Any]:
    return {"type": "number", "exclusiveMinimum": 0, "default": default, "description": description}


HARDWARE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The hardware runner's part (`nox -s conform-hardware`): which runner, "
    "which mesh, which model `vllm serve` starts for the live load test.",
    "additionalProperties": False,
    "properties": {
        "device_class": {
            "type": "string",
            "pattern": LABEL.pattern,
            "description": "Runner label of the device class (n300, 910b, ...); a spec with "
            "one has a hardware part (`vpr hardware plan`).",
        },
        "mesh_variable": {
            "type": "string",
            "pattern": ENV_NAME.pattern,
            "description": 'With parallelism = "mesh": the environment variable the '
            "plugin reads its device mesh from (Tenstorrent: MESH_DEVICE). The probe needs "
            "it set; CI sets it to mesh_device.",
        },
        "mesh_device": {
            "type": "string",
            "pattern": r"^[^\s]+$",
            "description": "The mesh variable's value on the runner (Tenstorrent: N150, N300, "
            "T3K, TG, P150). No default.",
        },
        "model": {"type": "string", "description": "Model `vllm serve` starts for the live test."},
        "serve_args": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": 'Extra `vllm serve` arguments; with parallelism = "mesh" GPU '
            "rank flags (-tp, -pp, -dp) are refused.",
        },
        "device_glob": {
            "type": "string",
            "description": "Device nodes that prove a device is visible (Tenstorrent: "
            "/dev/tenstorrent/*). No default: without it the probe says what to set.",
        },
        "parallelism": {
            "enum": ["mesh", "tp"],
            "default": "tp",
            "description": "How the plugin spreads a model over devices: `tp` (vLLM's "
            "-tp/-pp in serve_args; no rejection probe) or `mesh` (from mesh_variable; GPU "
            "rank flags are refused in serve_args and `vllm serve -tp 2` must be rejected).",
        },
        "runner_labels": {
            "type": "array",
            "items": {"type": "string", "pattern": LABEL.pattern},
            "minItems": 1,
            "description": "The CI runner labels of the hardware job (release.yml reads them "
            "through `vpr hardware plan`); default [self-hosted, device_class].",
        },
        "docs": {
            "type": "array",
            # relative, no `..`: the check never reads outside the plugin's checkout
            "items": {"type": "string", "pattern": r"^(?!/)(?!(?:.*/)?\.\.(?:/|$))[^\\]+$"},
            "minItems": 1,
            "default": list(DOCS_DEFAULT),
            "description": "Files of the plugin (globs relative to its root) whose usage the "
            "`hardware_docs` check compares with these expectations: -tp/--tensor-parallel-"
            "size, the mesh variable and its values, device nodes.",
        },
        "startup_timeout": _positive("Seconds `vllm serve` may take to answer /health.", 3600),
        "probe_timeout": _positive("Seconds the `-tp 2` start may take to fail.", 900),
        "max_requests": {
            "type": "integer",
            "minimum": 1,
            "default": 64,
            "description": "Live load test: at most this many requests.",
        },
        "duration_s": _positive("Live load test: at most this many seconds.", 600),
    },
}


@dataclass(frozen=True)
class HardwareSettings:
    device_class: str | None
    mesh_device: str | None
    model: str | None
    serve_args: tuple[str, ...]
    device_glob: str | None
    startup_timeout: float
    probe_timeout: float
    max_requests: int
    duration_s: float
    parallelism: str = "tp"
    runner_labels: tuple[str, ...] = ()
    mesh_variable: str | None = None
    docs: tuple[str, ...] = DOCS_DEFAULT


def _where(spec: Spec, key: str | None = None) -> str:
    """`FILE:LINE: [conformance.hardware] KEY` for an error message."""
    from vllm_plugin_release.buildspec.model import locate

    path = ("conformance", "hardware", *((key,) if key else ()))
    try:
        line = locate(Path(spec.path).read_text(encoding="utf-8"), path)
    except OSError:
        line = None
    at = f"{spec.path}:{line}" if line else str(spec.path)
    return f"{at}: [conformance.hardware]" + (f" {key}" if key else "")


def _table(spec: Spec) -> dict[str, Any]:
    """`[conformance.hardware]` as validated when the spec was loaded ({} when absent)."""
    return dict(spec.conformance("hardware") or {})


def configured(spec: Spec) -> bool:
    """Whether the spec has a hardware part (a `[conformance.hardware]` table with keys)."""
    return bool(_table(spec))


def declared(spec: Spec) -> HardwareSettings | None:
    """`[conformance.hardware]` with its defaults, as declared (None without one)."""
    table = _table(spec)
    return _typed(table) if table else None


def settings(spec: Spec) -> HardwareSettings:
    """`[conformance.hardware]` (validated with the spec) with its defaults; the one rule a
    schema cannot state, no GPU rank flags in `serve_args`, names the file, line and key."""
    table = _table(spec)
    serve_args = table.get("serve_args", [])
    parallelism = table.get("parallelism", "tp")
    variable = table.get("mesh_variable")
    if parallelism == "mesh" and not variable:
        raise BadInput(
            f'{_where(spec, "parallelism")} is "mesh" but mesh_variable is not set',
            hint="name the environment variable the plugin reads its mesh from "
            '(mesh_variable = "MESH_DEVICE" for Tenstorrent), or set parallelism = "tp"',
        )
    for arg in serve_args if parallelism == "mesh" else []:
        flag = arg.split("=", 1)[0]
        if flag in RANK_FLAGS:
            raise BadInput(
                f'{_where(spec, "serve_args")} has {arg!r}: with parallelism = "mesh" the '
                f"plugin takes its mesh from {variable} and rejects GPU rank flags",
                hint='remove it and set mesh_device, or set parallelism = "tp"',
            )
    return _typed(table)


def _typed(table: dict[str, Any]) -> HardwareSettings:
    device_class = table.get("device_class")
    numbers = {
        key: table.get(key, HARDWARE_SCHEMA["properties"][key]["default"])
        for key in ("startup_timeout", "probe_timeout", "max_requests", "duration_s")
    }
    return HardwareSettings(
        device_class=device_class,
        mesh_device=table.get("mesh_device"),
        model=table.get("model"),
        serve_args=tuple(table.get("serve_args", [])),
        device_glob=table.get("device_glob"),
        startup_timeout=float(numbers["startup_timeout"]),
        probe_timeout=float(numbers["probe_timeout"]),
        max_requests=int(numbers["max_requests"]),
        duration_s=float(numbers["duration_s"]),
        parallelism=table.get("parallelism", "tp"),
        runner_labels=tuple(
            table.get("runner_labels") or ["self-hosted", *([device_class] if device_class else [])]
        ),
        mesh_variable=table.get("mesh_variable"),
        docs=tuple(table.get("docs") or DOCS_DEFAULT),
    )
