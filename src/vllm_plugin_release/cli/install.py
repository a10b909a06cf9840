"""`vpr install`: a certified pairing from the manifest store into a Python environment."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from vllm_plugin_release.cli.storeargs import add_store_arguments, trusted
from vllm_plugin_release.core.errors import EXIT_OK
from vllm_plugin_release.edges import settings


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "install",
        help="install a certified pairing from the manifest store (hashes required)",
        description="Read the store through its signed head and verify the pairing's signed "
        "manifest with the publisher's public key (it must be the pairing asked for, and the "
        "ledger must hold no newer verdict for it), then "
        "install exactly its certified set (the pairing's hash lock and its wheels, from the "
        "store's embedded index) with --require-hashes into a Python environment, with "
        "vpr-guard and the verified manifest beside it (ENV/vpr-guard/): at every start vLLM "
        "then compares itself with that set. A second run "
        "over a matching environment changes nothing. Exit 0 installed or already matching; "
        "1 verification, verdict or check failed; 2 bad input; 3 install or network failure.",
    )
    p.add_argument(
        "pairing",
        nargs="?",
        metavar="PAIRING_ID",
        help="pairing id (or a unique prefix of 8+ characters)",
    )
    p.add_argument(
        "--core",
        metavar="VERSION",
        help="core version or specifier, with --plugin (instead of an id)",
    )
    p.add_argument("--plugin", metavar="NAME", help="plugin distribution name, with --core")
    add_store_arguments(p)
    p.add_argument(
        "--python-env",
        metavar="DIR",
        default=".venv",
        help="the environment to create or bring in line (default: .venv)",
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="no network: only the store's embedded index and uv's cache",
    )
    p.add_argument("--allow-uncertified", action="store_true", help="install a lab pairing anyway")
    p.add_argument(
        "--guard-policy",
        choices=["enforce", "warn", "off"],
        default=None,
        help="what vpr-guard does at vLLM's start-up when the environment is not the certified "
        "set, written to ENV/vpr-guard/policy ($VPR_GUARD overrides it; default without the "
        "file: enforce for a fleet verdict, warn for pilot or lab)",
    )
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        default=None,
        help="cache folder (default: $VPR_CACHE_DIR or .vpr)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_install)


def cmd_install(args: argparse.Namespace) -> int:
    from vllm_plugin_release.cli.storeargs import key_path
    from vllm_plugin_release.flows.install import Request, Target, install

    cache = settings.cache_from_args(args)
    result = install(
        trusted(args),
        Request(pairing=args.pairing, core=args.core, plugin=args.plugin),
        Target(
            env_dir=Path(args.python_env),
            scratch=cache.tmp,
            offline=args.offline,
            allow_uncertified=args.allow_uncertified,
            guard_policy=args.guard_policy,
            key_path=str(Path(os.path.abspath(key_path(args)))),
        ),
    )
    if args.json:
        from dataclasses import asdict

        print(json.dumps(asdict(result), indent=2, sort_keys=True))
        return EXIT_OK
    what = {"installed": "installed", "unchanged": "already matches; nothing to do"}
    print(
        f"{what[result.status]}: pairing {result.pairing_id[:16]} ({result.verdict}) in "
        f"{args.python_env}: {result.pins} pins with hashes, signature keyid "
        f"{(result.keyid or '')[:16]}, from {result.store}"
    )
    return EXIT_OK
