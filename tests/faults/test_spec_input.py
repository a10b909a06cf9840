"""Hostile buildspec values: each gives exit 2 with file:line and key, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import REFERENCE_SPEC
from vllm_plugin_release.cli import main

REFERENCE = REFERENCE_SPEC.read_text(encoding="utf-8")


def _check(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    spec = tmp_path / "spec.toml"
    spec.write_text(text, encoding="utf-8")
    code = main(["spec", "check", str(spec)])
    out = capsys.readouterr()
    return code, out.out + out.err


def _line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def test_duplicate_key_in_a_table_is_bad_input(tmp_path, capsys):
    text = REFERENCE.replace(
        'name = "reference-runtime"', 'name = "reference-runtime"\nname = "again"'
    )
    code, out = _check(tmp_path, text, capsys)
    assert code == 2, out
    assert "Traceback" not in out
    line = _line_of(text, 'name = "again"')
    assert f"spec.toml:{line}" in out
    assert "name" in out


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "+nan"])
def test_non_finite_number_is_refused_at_load(tmp_path, capsys, bad):
    text = REFERENCE.replace("median = 512", f"median = {bad}")
    code, out = _check(tmp_path, text, capsys)
    assert code == 2, out
    assert f"spec.toml:{_line_of(text, f'median = {bad}')}" in out
    assert "median" in out and "finite" in out


@pytest.mark.parametrize(
    "index",
    [
        r"x\n&& touch pwned",
        "not a url",
        "ftp://example.org/simple",
        "https:///simple",
        r"https://pypi.org/simple\u0000",
        "-https://pypi.org/simple",
    ],
)
def test_core_source_index_must_be_a_url(tmp_path, capsys, index):
    text = REFERENCE.replace('index = "https://pypi.org/simple"', f'index = "{index}"')
    code, out = _check(tmp_path, text, capsys)
    assert code == 2, out
    assert f"spec.toml:{_line_of(text, 'index = ')}" in out
    assert "index" in out


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ('path = "plugin/reference"', r'path = "plugin/ref\nerence"', "path"),
        ('overrides = "overrides.txt"', r'overrides = "over\u001brides.txt"', "overrides"),
        ('docs = "docs/SCHEDULING.md"', r'docs = "docs/\rSCHEDULING.md"', "docs"),
    ],
)
def test_control_characters_in_paths_are_refused(tmp_path, capsys, old, new, key):
    assert old in REFERENCE
    text = REFERENCE.replace(old, new)
    code, out = _check(tmp_path, text, capsys)
    assert code == 2, out
    line = _line_of(text, new.split(" = ")[0] + " = ")
    assert f"spec.toml:{line}" in out
    assert "control characters" in out and key in out


def test_git_url_starting_with_dash_is_refused(tmp_path, capsys):
    text = REFERENCE.replace(
        'kind = "path"\npath = "plugin/reference"',
        'kind = "git"\nurl = "--upload-pack=touch pwned"\ncommit = "' + "a" * 40 + '"',
    )
    code, out = _check(tmp_path, text, capsys)
    assert code == 2, out
    assert "must not start with '-'" in out and "url" in out


def test_reference_still_valid(tmp_path, capsys):
    code, out = _check(tmp_path, REFERENCE, capsys)
    assert code == 0, out


@pytest.mark.parametrize("url", ["localhost:8080", r"http://h/\nx", "-http://h/"])
def test_publish_index_must_be_a_url(tmp_path, capsys, url):
    text = REFERENCE + f'\n[publish]\nindex = "{url}"\n'
    code, out = _check(tmp_path, text, capsys)
    assert code == 2, out
    assert f"spec.toml:{len(text.splitlines())}" in out
    assert "index" in out


@pytest.mark.parametrize("depth", [2000, 500, 65])
def test_a_spec_nested_past_the_parser_or_the_cap_is_bad_input(tmp_path, capsys, depth):
    # 2,000 and 500 nested arrays: tomllib's own recursion runs out (a RecursionError);
    # 65: parsed, but deeper than the validation and the key locator walk
    code, out = _check(tmp_path, "version = " + "[" * depth + "]" * depth + "\n", capsys)
    assert code == 2, out
    assert "Traceback" not in out and "RecursionError" not in out
    assert "spec.toml" in out and "nested" in out
    if depth == 65:  # refused by the cap, before the schema sees it
        assert "nested deeper than 64 levels" in out


def test_spec_set_with_a_value_nested_too_deeply_is_bad_input(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(REFERENCE, encoding="utf-8")
    deep = "[" * 100 + "]" * 100
    code = main(["spec", "set", str(spec), "conformance.isolation.symbols", deep])
    out = capsys.readouterr()
    assert code == 2, out
    assert "nested" in out.out + out.err
    assert spec.read_text(encoding="utf-8") == REFERENCE  # nothing written
