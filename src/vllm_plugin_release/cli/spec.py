"""`vpr spec ...`: validate, print the schema, edit a key (comments preserved); and
`vpr settings`: the VPR_* environment variables, the other half of the configuration."""

from __future__ import annotations

import argparse
import json
import sys

from vllm_plugin_release.core import progress


def register(sub: argparse._SubParsersAction) -> None:
    spec = sub.add_parser("spec", help="validate, explain or edit a buildspec")
    ssub = spec.add_subparsers(dest="spec_command", metavar="ACTION", required=True)

    check = ssub.add_parser("check", help="validate a buildspec (exit 2 with every error)")
    check.add_argument("file", help="the buildspec file")
    check.set_defaults(func=_check)

    schema = ssub.add_parser("schema", help="print the buildspec JSON Schema")
    schema.set_defaults(func=_schema)

    docs = ssub.add_parser("docs", help="print docs/buildspec.md (generated from the schema)")
    docs.set_defaults(func=_docs)

    setter = ssub.add_parser(
        "set", help="set KEY (dotted) to VALUE (TOML syntax), keeping comments and order"
    )
    setter.add_argument("file", help="the buildspec file, edited in place")
    setter.add_argument("key", help="dotted key, e.g. core.version")
    setter.add_argument("value", help='TOML value, e.g. "0.26.0" or 1784975730 or true')
    setter.set_defaults(func=_set)

    listing = sub.add_parser(
        "settings", help="list the VPR_* environment variables: each one's value here and doc"
    )
    listing.add_argument(
        "--markdown", action="store_true", help="print docs/settings.md (their defaults) instead"
    )
    listing.set_defaults(func=_settings)


def _check(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec

    spec = load_spec(args.file)
    progress.info(f"{args.file}: valid (pairing {spec.name!r}, vLLM {spec.core.version})")
    return 0


def _schema(args: argparse.Namespace) -> int:
    from vllm_plugin_release.conform.registry import spec_schema

    json.dump(spec_schema(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


def _set(args: argparse.Namespace) -> int:
    from vllm_plugin_release.conform.registry import set_spec_value

    set_spec_value(args.file, args.key, args.value)
    progress.info(f"{args.file}: {args.key} updated")
    return 0


def _docs(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.docs import render
    from vllm_plugin_release.conform.registry import spec_schema

    sys.stdout.write(render(spec_schema()))
    return 0


def _settings(args: argparse.Namespace) -> int:
    from vllm_plugin_release.edges import settings

    sys.stdout.write(settings.markdown() if args.markdown else "\n".join(settings.lines()) + "\n")
    return 0
