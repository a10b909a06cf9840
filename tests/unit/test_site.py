"""`vpr manifest site` over a signed store: the matrix data, the same bytes from the same
store, a pairing whose signature does not verify shown as such, hostile text escaped, a
tampered store refused, and the output folder written whole or not at all. What a browser
shows of it: tests/unit/test_site_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.pairing import built_manifest, sign_store, store_key, vpr
from tests.sitestore import matrix_columns, record_matrix, small, variant, write_store
from tests.support import Index


def site(root: Path, store: Path, out: Path, *more: str):
    return vpr("manifest", "site", "--store", str(store), "--out", str(out),
               "--store-url", "https://store.example/", "--newest-from", "store", *more,
               cwd=root)  # fmt: skip


@pytest.fixture
def stored(tmp_path: Path) -> dict:
    store, manifests = small(tmp_path, store_key(tmp_path))
    return {"root": tmp_path, "store": store, "manifests": manifests}


def test_the_site_shows_every_pairing_per_site_with_lag_and_signature(stored: dict) -> None:
    out = stored["root"] / "site"
    done = site(stored["root"], stored["store"], out)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["compat.json", "index.html", "pairings"]
    compat = json.loads((out / "compat.json").read_text())
    assert compat["cores"] == ["0.26.0", "0.25.1", "0.19.0"]
    pages = len(compat["pairings"])
    assert f"{pages} pairing(s), 3 core version(s)" in done.stdout and "NOT" not in done.stdout
    pilot, fleet, lab = compat["pairings"]
    assert pilot["sites"]["cpu"] == {"verdict": "pilot", "lag_days": 113, "verified": True,
                                     "signed_by": "ledger entry #1",
                                     "time": "2026-11-01T00:00:00Z"}  # fmt: skip
    assert pilot["sites"]["hardware"]["signed_by"] is None  # not run, never a pass
    assert fleet["sites"]["hardware"]["verdict"] == "fleet"
    assert fleet["api_approval"]["by"] == "Rel Eng <releng@example.org>"
    assert lab["plugin"]["name"] == "vllm-spyre" and lab["sites"]["cpu"]["verdict"] == "lab"
    assert all(p["signature"]["verified"] for p in compat["pairings"])
    assert pilot["install"] == (
        f"vpr install {pilot['pairing_id'][:16]} --store https://store.example/ --key publisher.pub"
    )
    newest = compat["newest_core"]
    assert newest["version"] == "0.26.0"
    assert [b["plugin"] for b in newest["not_covered"]] == ["vllm-spyre"]
    index = (out / "index.html").read_text()
    assert "<script" not in index and "http://" not in index.replace("https://store.example", "")
    assert index.count('scope="col"') == 5 and index.count('scope="rowgroup"') == 3
    assert index.count('scope="row"') >= 4  # three pairings, one plugin not covering
    page = (out / pilot["page"]).read_text()
    assert "Verdict: pilot" in page and pilot["install"] in page
    assert (out / fleet["page"]).read_text().count("signature:vllm.v1.core.sched") == 1
    # a newer core named from outside: nobody covers it yet
    done = site(stored["root"], stored["store"], out, "--core-release", "0.27.1")
    compat = json.loads((out / "compat.json").read_text())
    assert compat["newest_core"]["covered_by"] == []
    assert len(compat["newest_core"]["not_covered"]) == 2


def test_the_same_store_gives_the_same_bytes(stored: dict) -> None:
    a, b = stored["root"] / "a", stored["root"] / "b"
    assert site(stored["root"], stored["store"], a).returncode == 0
    assert site(stored["root"], stored["store"], b).returncode == 0
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert len(files) == 5
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def test_a_pairing_whose_signature_does_not_verify_is_marked(stored: dict) -> None:
    """Known-bad: another key signs one pairing's statement (the head still vouches for
    the index): its cells say NOT verified, its page shows no scorecard."""
    from vllm_plugin_release.core import attest
    from vllm_plugin_release.edges import keys

    other = stored["root"] / "other.key"
    keys.generate_keypair(other)
    victim = stored["manifests"][0]
    statement = stored["store"] / "pairings" / f"{victim['pairing_id']}.intoto.jsonl"
    payload = attest.parse_envelope(statement.read_bytes(), "x")
    forged = attest.signed_bytes(attest.unverified_statement(payload, "x"),
                                 keys.load_private_key(other))  # fmt: skip
    statement.write_bytes(forged)
    out = stored["root"] / "site"
    assert site(stored["root"], stored["store"], out).returncode == 0
    compat = json.loads((out / "compat.json").read_text())
    bad = next(p for p in compat["pairings"] if p["pairing_id"] == victim["pairing_id"])
    assert bad["signature"]["verified"] is False
    assert "no signature by this key" in bad["signature"]["problem"]
    index = (out / "index.html").read_text()
    assert index.count("signature NOT verified: do not install") == 1
    page = (out / bad["page"]).read_text()
    assert "Signature NOT verified" in page and "No verified manifest to show" in page


def test_hostile_text_is_escaped(tmp_path: Path) -> None:
    """A signed manifest whose plugin name and check summary carry markup: shown as text."""
    key = store_key(tmp_path)
    base = built_manifest(tmp_path / "dist")
    evil = variant(base, core="0.26.0", plugin="evil<script>alert(1)</script>", commit="d" * 40)
    evil["conformance"]["checks"]["cadence"]["summary"] = (
        '<img src=x onerror="alert(2)"> lag 1 minor, 5 days'
    )
    store = write_store(tmp_path / "store", [evil], key)
    out = tmp_path / "site"
    assert site(tmp_path, store, out).returncode == 0
    for page in out.rglob("*.html"):
        text = page.read_text()
        assert "<script" not in text and "<img" not in text, page
    assert "evil&lt;script&gt;" in (out / "index.html").read_text()


def test_a_signed_manifest_with_a_key_of_another_type_is_marked(tmp_path: Path) -> None:
    """Known-bad: the publisher's key signs a manifest whose check evidence is text, not a
    list (the site does not run the schema; the typed manifest's parser checks every field
    it shows): listed as NOT verified naming the key, its page without a scorecard."""
    import copy
    import hashlib

    from vllm_plugin_release.core import attest
    from vllm_plugin_release.core import manifestdoc as doc

    key = store_key(tmp_path)
    good = variant(built_manifest(tmp_path / "dist"), core="0.26.0", plugin="p", commit="e" * 40)
    store = write_store(tmp_path / "store", [good], key)
    bad = copy.deepcopy(good)
    bad["conformance"]["checks"]["cadence"]["evidence"] = "see the log"
    data = doc.manifest_bytes(bad)
    pid = good["pairing_id"]
    (store / "pairings" / f"{pid}.json").write_bytes(data)
    statement = attest.build_statement(
        bad, hashlib.sha256(data).hexdigest(), {}, builder_id=attest.LOCAL_BUILDER
    )
    (store / "pairings" / f"{pid}.intoto.jsonl").write_bytes(attest.signed_bytes(statement, key))
    out = tmp_path / "site"
    done = site(tmp_path, store, out)
    assert done.returncode == 0, done.stderr
    (shown,) = json.loads((out / "compat.json").read_text())["pairings"]
    assert shown["signature"]["verified"] is False
    assert (
        "key 'conformance.checks.cadence.evidence' is 'see the log'"
        in (shown["signature"]["problem"])
    )
    assert "No verified manifest to show" in (out / shown["page"]).read_text()
    assert (  # the command's summary line counts it
        f"site {out}: 1 pairing(s), 1 core version(s); index.html, compat.json, 1 pairing "
        "page(s); 1 pairing(s) whose signature did NOT verify"
    ) in done.stdout


def test_a_tampered_store_writes_nothing(stored: dict) -> None:
    index = stored["store"] / "index.json"
    index.write_text(index.read_text().replace("0.19.0", "0.19.1"))
    out = stored["root"] / "site"
    done = site(stored["root"], stored["store"], out)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "sha256" in done.stderr and not out.exists()


def test_out_is_replaced_whole_and_a_foreign_folder_refused(stored: dict) -> None:
    out = stored["root"] / "site"
    assert site(stored["root"], stored["store"], out).returncode == 0
    (out / "stale.html").write_text("old")
    assert site(stored["root"], stored["store"], out).returncode == 0
    assert not (out / "stale.html").exists()  # a site is replaced, not merged
    foreign = stored["root"] / "docs"
    foreign.mkdir()
    (foreign / "notes.md").write_text("mine")
    done = site(stored["root"], stored["store"], foreign)
    assert done.returncode == 2 and "not a site vpr wrote" in done.stderr
    assert (foreign / "notes.md").read_text() == "mine"
    bad = site(stored["root"], stored["store"], out, "--core-release", "next")
    assert bad.returncode == 2 and "not a PEP 440 version" in bad.stderr
    leftovers = [p.name for p in stored["root"].iterdir() if re.match(r"^\.site\.", p.name)]
    assert leftovers == []


def test_an_unsigned_head_is_refused(stored: dict, tmp_path: Path) -> None:
    from vllm_plugin_release.edges import keys

    other = tmp_path / "x.key"
    keys.generate_keypair(other)
    sign_store(stored["store"], keys.load_private_key(other), check=False)  # another key
    done = site(stored["root"], stored["store"], stored["root"] / "site")
    assert done.returncode == 1 and "store head" in done.stderr


def test_compat_json_names_the_head_as_it_always_did() -> None:
    from vllm_plugin_release.core import site as sm

    publisher = sm.Publisher("s", "k", "id", sm.HeadStamp(7, "2026-12-01T00:00:00Z"))
    compat = sm.build([], [], publisher).to_json()
    assert json.dumps(compat["head"]) == '{"version": 7, "time": "2026-12-01T00:00:00Z"}'
    assert sm.build([], [], sm.Publisher("s", "k", "id", None)).to_json()["head"] is None


def _index(*versions: str) -> Index:
    index = Index()
    for version in versions:
        index.files[f"vllm-{version}.tar.gz"] = b"listed only"
    return index


def test_the_newest_core_comes_from_the_index_unless_given(stored: dict) -> None:
    root, store = stored["root"], str(stored["store"])
    index = _index("0.25.1", "0.26.0", "0.27.1", "0.28.0rc1")
    try:
        out = root / "site"
        done = vpr("manifest", "site", "--store", store, "--out", str(out), "--index",
                   index.url, cwd=root)  # fmt: skip
        assert done.returncode == 0, done.stderr
        newest = json.loads((out / "compat.json").read_text())["newest_core"]
        assert (newest["version"], newest["source"]) == ("0.27.1", "index")  # not the rc
        assert "/simple/vllm/" in index.hits
        asked = len(index.hits)
        given = vpr("manifest", "site", "--store", store, "--out", str(out), "--index",
                    index.url, "--core-release", "0.26.0", cwd=root)  # fmt: skip
        assert given.returncode == 0 and len(index.hits) == asked  # given: no index asked
        newest = json.loads((out / "compat.json").read_text())["newest_core"]
        assert (newest["version"], newest["source"]) == ("0.26.0", "given")
        index.files.clear()
        index.files["vllm-0.29.0rc1.tar.gz"] = b"listed only"
        none = vpr("manifest", "site", "--store", store, "--out", str(root / "b"), "--index",
                   index.url, cwd=root)  # fmt: skip
        assert none.returncode == 2 and "no final release of vllm listed" in none.stderr
    finally:
        index.close()
    gone = vpr("manifest", "site", "--store", store, "--out", str(root / "c"), "--index",
               index.url, cwd=root, env={"VPR_INDEX_ATTEMPTS": "1"})  # fmt: skip
    assert gone.returncode == 3, gone.stderr  # the index cannot be read: an outside failure
    assert "Traceback" not in gone.stderr and not (root / "c").exists()


def test_a_plugin_page_says_not_bisected_without_a_bisect_report(stored: dict) -> None:
    root, store = stored["root"], stored["store"]
    assert record_matrix(root, store, matrix_columns(), bisect=False).returncode == 1
    out = root / "site"
    assert site(root, store, out).returncode == 0
    compat = json.loads((out / "compat.json").read_text())
    (plugin,) = compat["plugins"]
    assert plugin["name"] == "vllm-reference-plugin"
    assert plugin["page"] == "plugins/vllm-reference-plugin.html"
    (run,) = plugin["runs"]
    assert run["commit"] == "a" * 40 and run["first_breaking"] == "0.26.0"
    assert [c["column"]["outcome"] for c in run["columns"]] == ["pass", "regressed", "not-run"]
    assert run["columns"][1]["certified"][0]["verdict"] == "pilot"
    page = (out / plugin["page"]).read_text()
    assert page.count("not bisected") == 1 and "bisected: first bad" not in page
    assert "&lt;b&gt;by&lt;/b&gt;" in page and "<b>by" not in page  # the reason, as text
    assert "<script" not in page
