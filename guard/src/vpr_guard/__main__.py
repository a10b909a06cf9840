"""`python -m vpr_guard snapshot --role ROLE=NAME ...` prints what `vpr install` records
(JSON); `python -m vpr_guard check [--json] [--prefix DIR]` compares this environment with
its certified record as the start-up check does (without vLLM's platform, which only a
process running vLLM knows). Exit 0 matches, 1 differs, 2 no usable record."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from vpr_guard import check, scan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vpr_guard", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    snap = sub.add_parser("snapshot", help="print every distribution and the role files (JSON)")
    snap.add_argument("--role", action="append", default=[], metavar="ROLE=NAME")
    chk = sub.add_parser("check", help="compare this environment with its certified record")
    chk.add_argument("--json", action="store_true")
    chk.add_argument("--prefix", default=None, help="the environment (default: this one)")
    args = parser.parse_args(argv)
    if args.command == "snapshot":
        roles = dict(r.split("=", 1) for r in args.role if "=" in r)
        print(json.dumps(scan.snapshot(roles), sort_keys=True))
        return 0
    state = check.load_state(args.prefix)
    findings = check.compare(state)
    code = 2 if state.problems else (1 if findings else 0)
    if args.json:
        print(
            json.dumps(
                {
                    "ok": code == 0,
                    "pairing_id": state.manifest.get("pairing_id"),
                    "findings": [dataclasses.asdict(f) for f in findings],
                    "recover": state.recover,
                },
                sort_keys=True,
            )
        )
    elif findings:
        print(check.message(state, findings, "check", ""))
    else:
        print(f"vpr-guard: this environment is the certified {check.describe(state)}")
    return code


if __name__ == "__main__":
    sys.exit(main())
