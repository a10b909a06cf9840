"""The store `benchmarks/bench_install.py` measures `vpr install` against is made the way a
publish makes one (no timing here: the bench's own set-up, run once, small)."""

from __future__ import annotations

import base64
import importlib
import json
from pathlib import Path

bench_install = importlib.import_module("benchmarks.bench_install")


def test_the_benchs_store_holds_the_pairing_and_its_ledger(tmp_path: Path) -> None:
    made = bench_install._project(tmp_path / "project", 3)
    store = Path(made["store"])
    index = json.loads((store / "index.json").read_text())
    assert made["pid"] in json.dumps(index)  # the pairing the bench installs is listed
    lines = (store / "ledger" / "ledger.jsonl").read_text().splitlines()
    said = [json.loads(base64.b64decode(json.loads(line)["payload"])) for line in lines]
    assert [e["pairing_id"] == made["pid"] for e in said] == [False, False, True]  # its own last
