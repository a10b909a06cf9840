"""`vpr hardware plan|probe|live|conform`: the hardware runner's part (`nox -s
conform-hardware`; the flow is `flows.hardware`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_plugin_release.cli import options as o
from vllm_plugin_release.core.errors import EXIT_OK
from vllm_plugin_release.edges import settings

if TYPE_CHECKING:  # the spec module loads jsonschema: keep it off `vpr --help`
    from vllm_plugin_release.buildspec.model import Spec
    from vllm_plugin_release.conform.lib.hardwaresettings import HardwareSettings


# The pairing each action works on: its spec, outputs, cache and plugin checkout.
PAIRING = [o.SPEC, o.DIST, o.CACHE, o.PLUGIN_SOURCE]


def register(sub: argparse._SubParsersAction) -> None:
    hardware = sub.add_parser(
        "hardware",
        help="the hardware runner's part: plan, probe, live, conform",
        description="The hardware runner's part of a release (`nox -s conform-hardware`).",
    )
    actions = hardware.add_subparsers(dest="hardware_command", metavar="ACTION")
    plan = actions.add_parser(
        "plan",
        parents=[o.JSON],
        help="specs with a hardware part and the runner label each needs (CI matrix)",
    )
    # several specs, unlike every other command's one: no default file, buildspec/* instead
    plan.add_argument(
        "--spec", action="append", default=[], help="a spec (repeatable; default: buildspec/*)"
    )
    plan.add_argument("--changed-since", metavar="REF", help="only specs changed since REF")
    plan.add_argument(
        "--github-output", action="store_true", help="append matrix= and count= to $GITHUB_OUTPUT"
    )
    plan.set_defaults(func=_plan)
    actions.add_parser(
        "probe",
        parents=[*PAIRING, o.RUNTIME_ENV, o.JSON],
        help="detect the vendor runtime, the device and the spec's mesh variable (exit 3 "
        "naming what is missing)",
    ).set_defaults(func=_probe)
    actions.add_parser(
        "live",
        parents=PAIRING,
        help="the -tp 2 rejection probe and the live load test against vllm serve; adds the "
        "hardware check to the scorecard",
    ).set_defaults(func=_live)
    actions.add_parser(
        "conform",
        parents=[*PAIRING, o.RUNTIME_ENV],
        help="in order: hardware probe, env --site hardware, conform --site hardware, "
        "hardware live (exit 0 only with verdict fleet)",
    ).set_defaults(func=_conform_hardware)


def _plan(args: argparse.Namespace) -> int:
    from vllm_plugin_release.flows.hardware import plan

    specs = [Path(s) for s in args.spec if s]
    result = plan(specs, args.changed_since or None)
    if args.json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        for entry in result.include:
            print(
                f"{entry.spec}: runs-on [{', '.join(entry.runner_labels)}]"
                + (
                    f" {entry.mesh_variable}={entry.mesh_device or '(not set)'}"
                    if entry.mesh_variable
                    else ""
                )
            )
        for spec, why in result.skipped:
            print(f"{spec}: no hardware part ({why})")
    if args.github_output:
        from vllm_plugin_release.edges.ci import github_output, output_text

        include = result.to_json()["include"]
        github_output({"matrix": output_text({"include": include}), "count": str(len(include))})
    return EXIT_OK


def _mesh_from_plan(hw: HardwareSettings) -> None:
    """CI hands the plan's `mesh_device` over as $VPR_MESH_VALUE (a workflow cannot name a
    variable from data): it becomes the spec's `mesh_variable` unless the runner set it."""
    import os

    value = settings.text("VPR_MESH_VALUE")
    if hw.mesh_variable and value and not os.environ.get(hw.mesh_variable):
        os.environ[hw.mesh_variable] = value


def _load(args: argparse.Namespace) -> tuple[Spec, Path, HardwareSettings]:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.conform.lib.hardwaresettings import settings as hardware_settings

    spec = load_spec(args.spec)
    hw = hardware_settings(spec)
    _mesh_from_plan(hw)
    return spec, Path(args.dist) / spec.name, hw


def _probe(args: argparse.Namespace) -> int:
    from vllm_plugin_release.edges.device import runtime_env_from_environ
    from vllm_plugin_release.flows import hardware

    spec, dist, hw = _load(args)
    runtime_env = args.runtime_env or runtime_env_from_environ()
    found = hardware.observe(spec, hardware.probe_python(dist, runtime_env), hw, dist)
    if args.json:
        sys.stdout.write(json.dumps(found.to_json(), indent=2) + "\n")
    hardware.require(found)
    return EXIT_OK


def _live(args: argparse.Namespace) -> int:
    from vllm_plugin_release.flows import hardware

    spec, dist, hw = _load(args)
    return hardware.live(spec, dist, hw, args.spec)


def _conform_hardware(args: argparse.Namespace) -> int:
    from vllm_plugin_release.edges import ci
    from vllm_plugin_release.flows import hardware

    spec, dist, _ = _load(args)
    try:
        return hardware.conform_hardware(spec, o.flow_options(hardware.Options, args), args.spec)
    finally:  # GitHub Actions: the hardware scorecard in the job summary, ::error:: per fail
        ci.report_scorecard(dist)
