"""`python -m benchmarks [NAME ...]`: run the benchmarks side by side, print ratios.

Results are also written to .vpr/bench/results.json (run-specific, not committed).
"""

from __future__ import annotations

import importlib
import json
import sys

from benchmarks.common import REPO, console

BENCHES = ("build_core", "env", "isolation", "replay", "release", "upstream")


def main(argv: list[str]) -> int:
    names = argv or list(BENCHES)
    results = {}
    for name in names:
        console.rule(f"bench {name}")
        results[name] = importlib.import_module(f"benchmarks.bench_{name}").main()
    out = REPO / ".vpr" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
