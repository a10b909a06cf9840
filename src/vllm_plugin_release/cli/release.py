"""`vpr release`: every stage in order for one pairing (the flow is `flows.release`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_plugin_release.cli.build import (
    add_backend,
    add_dirs,
    add_plugin_source,
    add_runner,
    add_spec_argument,
    load_spec_for,
)
from vllm_plugin_release.edges import settings

if TYPE_CHECKING:
    from vllm_plugin_release.buildspec.model import Spec
    from vllm_plugin_release.flows.release import Options


def register(sub: argparse._SubParsersAction) -> None:
    release = sub.add_parser(
        "release",
        help="every stage in order: lock check, build-core, build-plugin, env, conform, "
        "manifest, publish",
        description="Run every stage for one pairing, in order: lock check, build-core, "
        "build-plugin, env, conform (the scorecard), manifest, publish. Each stage reuses its "
        "cached result; each prints its log file when it starts, and the run ends with a "
        "summary naming what to read next. Exit 0 with verdict fleet or pilot, 1 with "
        "verdict lab or a failed gate, 2 bad input, 3 outside failure.",
    )
    add_spec_argument(release)
    add_dirs(release)
    add_plugin_source(release)
    add_runner(release)
    add_backend(release)
    release.add_argument(
        "--runtime-env",
        type=Path,
        default=None,
        metavar="PATH",
        help="an existing vendor runtime Python environment (e.g. TT-Metal's python_env)",
    )
    release.add_argument("--index", default=None, help="package index upload URL")
    release.add_argument("--store", default=None, help="manifest store (folder or URL)")
    release.add_argument("--signing-key", default=None, help="ed25519 private key file")
    release.add_argument(
        "--no-publish", action="store_true", help="stop after the manifest (nothing uploaded)"
    )
    release.add_argument(
        "--allow-uncertified",
        action="store_true",
        help="publish even when the verdict is lab (the manifest says so)",
    )
    release.add_argument(
        "--graph",
        nargs="?",
        const="text",
        choices=["text", "dot"],
        help="print the stages, what each needs and whether its result for today's inputs "
        "is cached (text, or DOT for Graphviz), then stop: nothing is built or fetched",
    )
    release.set_defaults(func=_release)


def _release(args: argparse.Namespace) -> int:
    from vllm_plugin_release.flows.release import Options, release

    spec = load_spec_for(args)
    options = Options(
        cache=settings.cache_from_args(args),
        dist_root=Path(args.dist),
        runner=args.runner,
        plugin_source=args.plugin_source,
        runtime_env=args.runtime_env,
        index=args.index,
        store=args.store,
        signing_key=args.signing_key,
        publish=not args.no_publish,
        allow_uncertified=args.allow_uncertified,
    )
    if args.graph:
        return _print_graph(spec, options, args.graph)
    outcome = release(spec, options)
    return 1 if outcome.facts.get("verdict") == "lab" else 0


def _print_graph(spec: Spec, options: Options, form: str) -> int:
    """`--graph`: the stages `vpr release` would walk, drawn; nothing runs."""
    import sys

    from vllm_plugin_release.core import stagegraph
    from vllm_plugin_release.flows.release import Outcome, graph

    stages = graph(spec, options, Outcome())
    states = stagegraph.cache_states(stages)  # looked up, never run: no fetch, no write
    if form == "dot":
        sys.stdout.write(stagegraph.dot(stages, name=f"release {spec.name}", states=states))
    else:
        sys.stdout.write(
            f"vpr release {spec.name}: the line runs in this order, '|| beside' side by side\n"
        )
        sys.stdout.write(stagegraph.text(stages, states=states))
    return 0
