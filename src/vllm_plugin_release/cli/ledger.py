"""`vpr manifest ledger`: print, filter and verify the store's signed pairing ledger; the
compatibility matrix generated from it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.cli.storeargs import add_store_arguments, trusted
from vllm_plugin_release.core.errors import EXIT_GATE, EXIT_OK

if TYPE_CHECKING:
    from vllm_plugin_release.core.ledger import LedgerEntry


def register_ledger(sub: Any) -> None:
    p = sub.add_parser(
        "ledger",
        help="print and filter the signed pairing ledger (every verdict ever reached)",
        description="Read the store's pairing ledger through its signed head and print the "
        "entries that match the filters (--matrix: the compatibility matrix generated from "
        "the ledger, the latest verdict per core and plugin commit). Without a filter it "
        "reads STORE/ledger/ledger.jsonl and checks every entry's ed25519 signature, its "
        "link to the previous entry, and the entry count and last entry the head signs; "
        "with one, or --matrix, the ledger's summary the head vouches for (only the parts "
        "that can hold the answer). Exit 0; 1 when an entry's signature or link fails (the "
        "ledger is refused, naming the line), a file is not the one the head vouches for, "
        "or no entry matches; 2 bad input.",
    )
    add_store_arguments(p)
    p.add_argument("--core", help="core version, or a core commit prefix")
    p.add_argument("--plugin", help="plugin distribution name, or a plugin commit prefix")
    p.add_argument(
        "--verdict",
        choices=["fleet", "pilot", "lab", "pass", "fail", "regressed", "not-run"],
        help="fleet|pilot|lab (release), pass|fail (nightly), pass|fail|regressed|not-run "
        "(matrix: a column's outcome)",
    )
    p.add_argument(
        "--kind",
        choices=["release", "nightly", "matrix", "repair"],
        help="matrix: a version matrix column; repair: a store file a writer found differing "
        "from the signed head, restored",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the matching entries as JSON")
    out.add_argument(
        "--matrix",
        choices=["markdown", "json"],
        default=None,
        help="print the compatibility matrix generated from the matching entries",
    )
    p.add_argument(
        "--cache-dir", default=None, help="cache folder (default: $VPR_CACHE_DIR or .vpr)"
    )
    p.set_defaults(func=cmd_ledger)


def cmd_ledger(args: argparse.Namespace) -> int:
    from vllm_plugin_release.core import ledger, progress
    from vllm_plugin_release.core.summary import LEDGER
    from vllm_plugin_release.edges import summary

    store = trusted(args)
    filters = {"core": args.core, "plugin": args.plugin, "verdict": args.verdict, "kind": args.kind}
    chosen: list[LedgerEntry] | None = None
    if not any(filters.values()) and args.matrix:  # every entry's: one file of the summary
        text, count = summary.matrix(store, args.matrix, LEDGER)
    elif not any(filters.values()):  # every entry: the whole ledger, each line checked
        chosen = store.ledger()
        count = len(chosen)
    else:  # the chunks of the summary that can hold a match
        chosen, count = summary.select(store, **filters)
    if args.matrix:
        if chosen is not None:
            text = ledger.matrix_text(ledger.matrix(chosen), args.matrix)
        sys.stdout.write(text)
    elif args.json:
        raws = None if chosen is None else [e.raw for e in chosen]  # as signed
        print(json.dumps(raws, indent=2, sort_keys=True))
    elif chosen:
        print(ledger.render_lines(chosen))
    progress.note(f"ledger: {count} entries verified in {store.location}")
    if not (count if chosen is None else chosen):  # no entry at all, or none matches
        progress.note("no ledger entry matches")
        return EXIT_GATE
    return EXIT_OK
