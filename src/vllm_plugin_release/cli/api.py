"""`vpr api-contract` (vLLM's served API as a client contract) and `vpr api-diff`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from vllm_plugin_release.cli import options as o
from vllm_plugin_release.core.errors import EXIT_GATE, EXIT_OK

# The conform modules are imported by the commands that use them, not when the parser is
# built: every `vpr` command builds it (`vpr scan-core` start-up, say).


def _cmd_contract(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.conform.checks.api import api_config
    from vllm_plugin_release.conform.lib.apicontract import (
        capture,
        contract_from_capture,
        dump_contract,
    )
    from vllm_plugin_release.core import records
    from vllm_plugin_release.core.cache import atomic_write_text

    spec = load_spec(args.spec)
    cfg = api_config(spec)
    recorded = None
    if not args.python or not (args.platform_class or cfg.platform_class):
        recorded = records.env_record(records.dist_dir(Path(args.dist), spec.name), spec.path)
    python = Path(args.python) if args.python else recorded.python
    platform_class = args.platform_class or cfg.platform_class
    if not platform_class and recorded is not None:
        platform_class = recorded.platform_class
    captured = capture(
        python,
        cfg.tasks,
        platform_class,
        endpoint_plugins=cfg.endpoint_plugins,
        timeout=cfg.timeout,
    )
    contract = contract_from_capture(captured)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, dump_contract(contract))
    counts = captured.counts
    print(
        f"wrote {out}: vLLM {contract['core']['version']} contract, "
        f"{counts.paths} paths, {counts.schemas} component schemas, "
        f"{len(contract['models'])} models (tasks {list(cfg.tasks)})"
    )
    for note in captured.notes:
        print(f"  {note}")
    plugins = captured.endpoint_plugins
    if plugins.discovered:
        print(f"  endpoint plugins attached: {plugins.attached or 'none'}")
    return EXIT_OK


def _cmd_diff(args: argparse.Namespace) -> int:
    from vllm_plugin_release.conform.lib.apicontract import load_contract
    from vllm_plugin_release.conform.lib.apidiff import diff_contracts, render_markdown, render_text

    old = load_contract(Path(args.old))
    new = load_contract(Path(args.new))
    changes = diff_contracts(old, new)
    breaking = sum(c.breaking for c in changes)
    if args.json:
        payload = {
            "old": {"file": args.old, "core": old["core"]},
            "new": {"file": args.new, "core": new["core"]},
            "breaking": breaking,
            "additive": len(changes) - breaking,
            "changes": [c.to_json() for c in changes],
        }
        sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    elif args.markdown:
        command = f"vpr api-diff {args.old} {args.new} --markdown"
        sys.stdout.write(render_markdown(old, new, changes, args.old, args.new, command))
    else:
        sys.stdout.write(render_text(old, new, changes, args.old, args.new))
    return EXIT_GATE if breaking else EXIT_OK


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "api-contract",
        help="write the pairing's API contract (OpenAPI + model schemas)",
        description="Build vLLM's OpenAI-compatible app in the pairing env (no engine, no "
        "model) and write its OpenAPI document and request/response model schemas as a "
        "contract that later pairings are gated against.",
        parents=[o.SPEC, o.DIST],
    )
    p.add_argument("--out", required=True, metavar="PATH", help="contract file to write")
    p.add_argument(
        "--python",
        metavar="PATH",
        help="python of the pairing env (default: dist/NAME/env.json key python)",
    )
    p.add_argument(
        "--platform-class",
        metavar="CLASS",
        help="the plugin's Platform class (package.module:Class); default: the activated "
        "platform plugin, else vLLM's CpuPlatform as a stand-in",
    )
    p.set_defaults(func=_cmd_contract)

    d = subparsers.add_parser(
        "api-diff",
        help="diff two API contracts (exit 1 on a breaking change)",
        description="Compare contract NEW against contract OLD from the client's side. "
        "Exit 1 when NEW breaks clients of OLD, 0 otherwise, 2 for a file that is not a "
        "contract or OpenAPI document.",
    )
    d.add_argument("old", metavar="OLD", help="contract clients rely on today")
    d.add_argument("new", metavar="NEW", help="contract to gate")
    fmt = d.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help=o.JSON_HELP)
    fmt.add_argument("--markdown", action="store_true", help="print a Markdown report")
    d.set_defaults(func=_cmd_diff)
