"""`vpr release`: every stage in order for one pairing (the flow is `flows.release`)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_plugin_release.cli import options as o
from vllm_plugin_release.cli.options import load_spec_for
from vllm_plugin_release.edges import settings

if TYPE_CHECKING:
    from vllm_plugin_release.buildspec.model import Spec
    from vllm_plugin_release.flows.release import Options


def register(sub: argparse._SubParsersAction) -> None:
    release = sub.add_parser(
        "release",
        parents=[
            *(o.SPEC, o.DIST, o.CACHE, o.PLUGIN_SOURCE, o.SITE, o.BACKEND, o.INTERPRETER),
            *(o.RUNTIME_ENV, o.STORE, o.SIGNING_KEY, o.ALLOW_UNCERTIFIED),
        ],
        help="every stage of the release line for one pairing, in order (its --help names them)",
        description=(
            "Run every stage for one pairing, in the order of the release's stage graph\n"
            "(below). Each stage reuses its cached result; each prints its log file when it\n"
            "starts, and the run ends with a summary naming what to read next. Exit 0 with\n"
            "verdict fleet or pilot, 1 with verdict lab or a failed gate, 2 bad input, 3\n"
            "outside failure."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    release.lazy_epilog = _stages_epilog
    release.add_argument(
        "--index",
        metavar="URL",
        help="package index upload URL (default: as publish)",
    )
    release.add_argument(
        "--no-publish", action="store_true", help="stop after the manifest (nothing uploaded)"
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


def _stages_epilog() -> str:
    """The stages `vpr release` runs, read from its stage graph over the spec --spec names
    (made only when the help is shown: nothing runs)."""
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.cli import _Parser
    from vllm_plugin_release.core.errors import VprError
    from vllm_plugin_release.flows.release import Options, Outcome, graph

    argv = list(_Parser.argv)
    given = argv[argv.index("--spec") + 1 : argv.index("--spec") + 2] if "--spec" in argv else []
    path = given[0] if given else o.SPEC.get_default("spec")
    try:
        spec = load_spec(path)
    except VprError as exc:
        return f"stages: read from the stage graph of a spec; {exc}"
    options = Options(cache=settings.cache_from_args(None), dist_root=Path("dist"))
    stages = graph(spec, options, Outcome()).stages
    unpublished = {s.name for s in graph(spec, replace(options, publish=False), Outcome()).stages}
    width = max(len(s.name) for s in stages)
    lines = []
    for stage in stages:
        notes = [stage.about] if stage.about else []
        notes += [] if stage.name in unpublished else ["not with --no-publish"]
        lines.append(f"  {stage.name:<{width}}  {'; '.join(notes)}".rstrip())
    return "stages, in the order the line runs them:\n" + "\n".join(lines)


def _release(args: argparse.Namespace) -> int:
    from vllm_plugin_release.flows.release import Options, release

    spec = load_spec_for(args)
    options = o.flow_options(Options, args, publish=not args.no_publish)
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
