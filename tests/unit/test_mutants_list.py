"""The mutation gate's list (tests/mutants.toml) stays true to the code: every site's file
and functions exist, its tests' files too; a commit's files select the sites in them and
nothing else (what .ci/run passes). cosmic-ray itself runs in
`nox -s mutants`, not here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import mutants


def test_every_site_names_code_and_tests_that_exist() -> None:
    sites = mutants.load_sites()
    assert len(sites) >= 20
    for site in sites:
        assert len(mutants.spans(site)) == len(site.functions), site.name
        assert mutants.operators(site), site.name
    flagged = {s.file for s in sites if "--require-hashes" in s.flags}
    assert len(flagged) == 5  # each install argument list that requires hashes


def test_a_site_is_chosen_by_its_file() -> None:
    sites = mutants.load_sites()
    chosen = mutants.select(sites, ["src/vllm_plugin_release/core/storehead.py"])
    assert [s.name for s in chosen] == ["store head: rollback and equivocation"]
    fetch = mutants.select(sites, ["README.md", "src/vllm_plugin_release/edges/fetch.py"])
    assert [s.name for s in fetch] == [
        "sha256: sdist download",
        "archive escape: tar",
        "archive escape: zip",
    ]
    assert mutants.select(sites, ["README.md", "tests/unit/test_ledger.py"]) == []
    assert mutants.select(sites, []) == sites  # no file given: the whole list


def test_a_list_naming_code_that_is_gone_is_refused(tmp_path: Path) -> None:
    listed = tmp_path / "mutants.toml"
    listed.write_text(
        '[[site]]\nname = "x"\nfile = "src/vllm_plugin_release/core/storehead.py"\n'
        'functions = ["check_not_older", "renamed_away"]\ntests = ["tests/unit/test_ledger.py"]\n'
    )
    (site,) = mutants.load_sites(listed)
    with pytest.raises(mutants.ListProblem, match="has no renamed_away"):
        mutants.spans(site)
    listed.write_text(listed.read_text().replace("test_ledger.py", "test_gone.py"))
    with pytest.raises(mutants.ListProblem, match=r"test file of tests/unit/test_gone\.py"):
        mutants.load_sites(listed)
    assert mutants.main(["--list", "README.md"]) == 0
