"""The compatibility site as a reader sees it: headless Chromium (Debian's, driven over the
DevTools pipe by scripts/sitecheck.py) loads the site from its folder at 390 px (a phone)
and 1280 px wide, takes screenshots, and reports the text of the matrix cells, where the
matrix is and whether the page scrolls sideways; the same for a plugin's page across every
core (the ledger's matrix entries, recorded by `vpr matrix assemble --store`). Known-bad:
the same page with a matrix forced wider than the phone is caught; a column not run shows
its reason, as text. Skips, saying why, where no Chromium is installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pairing import store_key, vpr
from tests.sitestore import BREAKING, NOT_RUN_REASON, matrix_columns, record_matrix, small
from tests.support import Index, script

check = script("sitecheck")
pytestmark = [
    pytest.mark.skipif(
        check.find_browser() is None, reason="no Chromium (apt-get install -y chromium)"
    ),
    pytest.mark.screenshot,  # where .ci/run installed Chromium, a skip fails (tests/required.py)
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("site")
    store, manifests = small(root, store_key(root))
    out = root / "site"
    done = vpr("manifest", "site", "--store", str(store), "--out", str(out),
               "--newest-from", "store", cwd=root)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {"root": root, "out": out, "manifests": manifests,
            "compat": json.loads((out / "compat.json").read_text())}  # fmt: skip


def _cells(seen: dict) -> list[list[str]]:
    return [[c["text"].strip() for c in row] for row in seen["rows"]]


@pytest.mark.parametrize("width", [390, 1280])
def test_the_matrix_is_visible_and_reads_the_same_at_each_width(built: dict, width: int) -> None:
    shots = built["root"] / "shots"
    seen = check.inspect(built["out"] / "index.html", width, shots)
    assert check.problems(seen) == []
    assert seen["viewport"] == width and seen["scroll_width"] <= width
    assert seen["matrix"]["visible"] and seen["matrix"]["right"] <= width
    assert [h["scope"] for h in seen["headers"]] == ["col", "col", "col"]
    assert [h["text"] for h in seen["headers"]] == ["core and plugin", "cpu site",
                                                    "hardware site"]  # fmt: skip
    cells = _cells(seen)
    # the group row of each core, then one row per pairing: header cell, cpu, hardware
    assert [row[0].split("\n")[0] for row in cells if len(row) == 1] == [
        "vLLM 0.26.0 (1 pairing)", "vLLM 0.25.1 (1 pairing)", "vLLM 0.19.0 (1 pairing)"
    ]  # fmt: skip
    rows = [row for row in cells if len(row) == 3]
    assert [r[0].split("\n")[0] for r in rows] == [
        "vllm-reference-plugin 0.1.0", "vllm-reference-plugin 0.1.0", "vllm-spyre 0.1.0"
    ]  # fmt: skip
    assert rows[0][1].split("\n") == ["PILOT", "lag 113 days", "signature verified (ledger "
                                      "entry #1)"]  # fmt: skip
    assert rows[0][2] == "not run"
    assert rows[1][2].split("\n")[:2] == ["FLEET", "lag 40 days"]
    assert "breaking core API change approved" in rows[1][0]
    assert rows[2][1].split("\n")[0] == "LAB"
    assert all(row[0]["scope"] == "row" for row in seen["rows"] if len(row) == 3)
    for shot in (seen["screenshot"], seen["full_page"]):
        assert Path(shot).stat().st_size > 5000
    if width == 390:  # a phone shows the whole width of the matrix on its first screen
        assert seen["matrix"]["left"] >= 0 and seen["matrix"]["top"] < 844


def test_a_pairing_page_reads_on_a_phone(built: dict) -> None:
    fleet = built["compat"]["pairings"][1]
    seen = check.inspect(built["out"] / fleet["page"], 390, built["root"] / "shots")
    assert check.problems(seen, matrix_page=False) == []
    assert seen["scroll_width"] <= 390


def test_a_matrix_wider_than_the_phone_is_caught(built: dict, tmp_path: Path) -> None:
    page = tmp_path / "index.html"
    text = (built["out"] / "index.html").read_text()
    page.write_text(text.replace("</style>", "#matrix{min-width:900px}</style>"))
    problems = check.problems(check.inspect(page, 390))
    assert any("scrolls sideways" in p for p in problems), problems
    assert any("does not fit the 390 px viewport" in p for p in problems), problems


def test_the_script_writes_shots_and_exits_by_what_it_saw(built: dict, tmp_path: Path) -> None:
    shots = tmp_path / "shots"
    assert check.main([str(built["out"]), "-o", str(shots)]) == 0
    assert sorted(p.name for p in shots.iterdir()) == [
        "index-1280-full.png", "index-1280.png", "index-390-full.png", "index-390.png",
        "sitecheck.json",
    ]  # fmt: skip
    assert check.main([str(tmp_path / "nowhere")]) == 2


@pytest.fixture(scope="module")
def across(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The small store with a plugin's matrix in its ledger; the site's newest core read
    from a loopback index (which lists a newer release candidate, not a final release)."""
    root = tmp_path_factory.mktemp("across")
    store, _ = small(root, store_key(root))
    assert record_matrix(root, store, matrix_columns()).returncode == 1  # it regressed
    index = Index()
    for version in ("0.26.0", "0.27.1", "0.28.0rc1"):
        index.files[f"vllm-{version}.tar.gz"] = b"listed only"
    out = root / "site"
    try:
        done = vpr("manifest", "site", "--store", str(store), "--out", str(out),
                   "--index", index.url, cwd=root)  # fmt: skip
    finally:
        index.close()
    assert done.returncode == 0, done.stderr
    assert "1 plugin page(s) across every core" in done.stdout
    assert "newest core 0.27.1 (from the index)" in done.stdout
    return {"root": root, "out": out, "page": out / "plugins" / "vllm-reference-plugin.html"}


@pytest.mark.parametrize("width", [390, 1280])
def test_a_plugin_across_every_core_reads_the_same_at_each_width(across: dict, width: int) -> None:
    seen = check.inspect(across["page"], width, across["root"] / "shots")
    assert check.problems(seen) == []
    assert seen["viewport"] == width and seen["scroll_width"] <= width
    assert [h["text"] for h in seen["headers"]] == ["core", "plugin tests", "what broke"]
    good, bad, lost = _cells(seen)
    assert good[0].split("\n")[:2] == ["vLLM 0.25.1", "lowest · Python 3.11 · ledger entry #5"]
    assert good[1] == "PASS\n2 passed, 0 failed, 1 deferred"
    assert good[2] == "no breaking change reported"
    assert bad[0].split("\n")[:3] == ["vLLM 0.26.0", "pinned · Python 3.11 · ledger entry #6",
                                       "published pairing @aaaaaaaaaaaa: pilot"]  # fmt: skip
    assert bad[1].split("\n") == ["REGRESSED", "1 passed, 1 failed, 1 deferred",
                                   "regressed against 0.25.1: 1 test(s)"]  # fmt: skip
    assert bad[2].split("\n") == [
        "breaking core API changes (2):", BREAKING, "removed:vllm.old_api",
        "bisected: first bad commit eeeeeeeeeeee [Core] Pass max_num_blocks to the block "
        "table (last good dddddddddddd)",
    ]  # fmt: skip
    # the column not run: its reason and exit class, its markup shown as text
    assert lost[1] == f"NOT RUN\nexit 3 (an outside failure): {NOT_RUN_REASON}"
    assert lost[2] == "not tested here"
    text = seen["text"]
    assert "First breaking core: vLLM 0.26.0 (its tests regressed against 0.25.1)" in text
    assert "Newest vLLM release 0.27.1 (the newest on the core's index): not run" in text
    for shot in (seen["screenshot"], seen["full_page"]):
        assert Path(shot).stat().st_size > 5000


def test_the_index_links_each_plugin_across_every_core(across: dict) -> None:
    seen = check.inspect(across["out"] / "index.html", 390, across["root"] / "shots")
    assert check.problems(seen) == []
    text = seen["text"]
    assert "Each plugin across every core" in text
    assert "vLLM 0.25.1 … 0.27.1 (3 columns)\n1 pass, 1 regressed, 1 not run\tvLLM 0.26.0" in text
    assert "vLLM 0.27.1 (the newest on the core's index)" in text
    assert 'href="plugins/vllm-reference-plugin.html"' in (across["out"] / "index.html").read_text()


def test_the_script_checks_each_plugin_page_too(across: dict, tmp_path: Path) -> None:
    shots = tmp_path / "shots"
    assert check.main([str(across["out"]), "-o", str(shots), "--widths", "390"]) == 0
    assert sorted(p.name for p in shots.iterdir()) == [
        "index-390-full.png", "index-390.png", "sitecheck.json",
        "vllm-reference-plugin-390-full.png", "vllm-reference-plugin-390.png",
    ]  # fmt: skip
    page = across["page"]
    text = page.read_text()
    page.write_text(text.replace("</style>", "#matrix{min-width:700px}</style>"))
    try:  # a plugin page wider than the phone fails the script
        assert check.main([str(across["out"]), "-o", str(shots), "--widths", "390"]) == 1
    finally:
        page.write_text(text)
