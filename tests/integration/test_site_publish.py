"""The site of a store the pipeline wrote: a pairing whose spec carries an approval of a
breaking core API change (`vpr bump --approve ...`), built into its signed manifest by `vpr
manifest build`, published by `vpr publish` (a loopback pypiserver), then `vpr manifest
site` over that store: the approval on the pairing's page and in compat.json, the
pairing's verdict and its install line, the guard named."""

from __future__ import annotations

import json
from pathlib import Path

from tests.pairing import published_pairing, vpr

APPROVAL = {
    "from": "0.25.1",
    "by": "Rel Eng <releng@example.org>",
    "why": "plugin commit c0ffee follows the renamed keyword",
    "changes": ["keyword:vllm.v1.worker.block_table.MultiGroupBlockTable.__init__:max_model_len"],
}


def test_an_approved_bump_publishes_and_shows_on_the_site(tmp_path: Path) -> None:
    p = published_pairing(tmp_path, approval=APPROVAL, guard=True)
    manifest = json.loads((tmp_path / "dist" / "ref" / "manifest.json").read_text())
    assert manifest["api_approval"] == {**APPROVAL, "to": "0.26.0"}
    out = tmp_path / "site"
    done = vpr("manifest", "site", "--store", str(p["store"]), "--out", str(out),
               "--newest-from", "store", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    compat = json.loads((out / "compat.json").read_text())
    (pairing,) = compat["pairings"]
    assert pairing["api_approval"]["by"] == APPROVAL["by"] and pairing["guard"] is True
    assert pairing["signature"]["verified"] and pairing["sites"]["cpu"]["verdict"] == "pilot"
    page = (out / pairing["page"]).read_text()
    assert "approved by <strong>Rel Eng &lt;releng@example.org&gt;</strong>" in page
    assert APPROVAL["changes"][0] in page and "with vpr-guard" in page
    assert "breaking core API change approved" in (out / "index.html").read_text()
