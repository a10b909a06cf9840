"""`vpr bisect`, the parts that build nothing: the search, the version range and its bad
input, JUnit error lines, the core history (real git repositories), and the CLI's bad input
(exit 2 before any build). The builds: tests/integration/test_bisect.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests import synthcore
from tests.support import Index, git, spec_head, vpr
from vllm_plugin_release.core.bisect import (
    Probe,
    first_error_lines,
    nearest_versions,
    parse_report,
    render_markdown,
    search,
    versions_between,
)
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges import git as vcs


def _prober(first_bad: int, calls: list[str], other: tuple[str, ...] = ()):
    def probe(candidate: str) -> Probe:
        calls.append(candidate)
        broken = int(candidate) >= first_bad
        return Probe(candidate, ("t::regressed",) * broken + other)

    return probe


@pytest.mark.parametrize("n", [2, 3, 8, 100, 1000])
def test_search_finds_each_first_bad_in_log2_probes(n: int) -> None:
    candidates = [str(i) for i in range(n)]
    for first_bad in {1, n // 2, n - 1} - {0}:
        calls: list[str] = []
        found, steps = search(candidates, ["t::regressed"], _prober(first_bad, calls))
        assert found == first_bad
        assert len(calls) == len(steps) <= math.ceil(math.log2(n))
        assert all(v == ("bad" if int(c) >= first_bad else "good") for c, v in steps)


def test_search_ignores_failures_outside_the_regressed_tests() -> None:
    # A test failing everywhere in between (not one of the bad end's regressions) must not
    # steer the search: with it watched, the first "bad" is the first candidate probed.
    candidates = [str(i) for i in range(16)]
    calls: list[str] = []
    probe = _prober(11, calls, other=("t::flaky",))
    assert search(candidates, ["t::regressed"], probe)[0] == 11
    assert search(candidates, ["t::flaky"], probe)[0] == 1  # the mutation: watched wrongly


AVAILABLE = ["0.25.0", "0.25.1", "0.26.0rc1", "0.26.0rc2", "0.26.0", "0.27.0"]


def test_versions_between_keeps_the_range_in_release_order() -> None:
    got = versions_between("0.25.1", "0.26.0", list(reversed(AVAILABLE)), "idx")
    assert got == ["0.25.1", "0.26.0rc1", "0.26.0rc2", "0.26.0"]


def test_a_version_not_on_the_index_names_the_nearest() -> None:
    with pytest.raises(BadInput) as err:
        versions_between("0.25.2", "0.26.0", AVAILABLE, "http://idx/simple")
    text = str(err.value)
    assert "--good 0.25.2" in text and "http://idx/simple" in text
    assert "nearest: 0.25.0, 0.25.1, 0.26.0rc1" in text
    assert nearest_versions("0.26.0rc3", AVAILABLE, 2) == ["0.26.0rc2", "0.26.0"]
    with pytest.raises(BadInput, match="not older"):
        versions_between("0.26.0", "0.25.1", AVAILABLE, "idx")


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="2" tests="3">
<testcase classname="tests.test_a" name="test_ok"/>
<testcase classname="tests.test_a" name="test_bad">
<failure message="AttributeError: module 'vllm' has no attribute 'api_level'">def test_bad():
&gt;   vllm.api_level()
E   AttributeError
tail line</failure></testcase>
<testcase classname="tests.test_b" name="test_err"><error message="fixture failed">x</error>
</testcase></testsuite></testsuites>
"""


def test_first_error_lines_of_each_failing_test(tmp_path: Path) -> None:
    (tmp_path / "j.xml").write_text(JUNIT)
    got = first_error_lines(tmp_path / "j.xml", 3)
    assert set(got) == {"tests.test_a::test_bad", "tests.test_b::test_err"}
    assert got["tests.test_a::test_bad"] == [
        "AttributeError: module 'vllm' has no attribute 'api_level'",
        "def test_bad():",
        ">   vllm.api_level()",
    ]
    assert first_error_lines(tmp_path / "missing.xml") == {}


REPORT = {
    "mode": "git",
    "source": "/core",
    "core": "vllm",
    "good": "v1",
    "bad": "v2",
    "candidates": 8,
    "watched": ["t::x"],
    "steps": [{"candidate": "c4", "verdict": "good"}, {"candidate": "c5", "verdict": "bad"}],
    "last_good": "c4",
    "first_bad": {
        "candidate": "c5",
        "subject": "rename api_level",
        "failing": ["t::x"],
        "errors": {"t::x": ["AttributeError: no api_level"]},
    },
}


def test_report_markdown_names_commit_tests_and_errors() -> None:
    text = render_markdown(parse_report(REPORT))
    assert "First bad commit: `c5` rename api_level (last good: `c4`)" in text
    assert "- `t::x`\n    AttributeError: no api_level" in text
    assert "| 2 | `c5` | bad |" in text


@pytest.fixture
def core(tmp_path: Path) -> tuple[Path, list[str]]:
    return tmp_path / "core", synthcore.core_repo(tmp_path / "core")


def test_history_lists_the_range_and_checks_out_a_commit(core, tmp_path: Path) -> None:
    path, commits = core
    cache = Cache(tmp_path / "cache")
    repo = vcs.mirror(str(path), cache)
    good = vcs.resolve(repo, "v0.1.0", "--good", str(path))
    bad = vcs.resolve(repo, "v0.2.0", "--bad", str(path))
    assert (good, bad) == (commits[0], commits[-1])
    assert vcs.commits_between(repo, good, bad, str(path)) == commits
    tree = vcs.checkout(repo, commits[4], cache)
    assert "api_version" in (tree / "vllm" / "__init__.py").read_text()
    assert vcs.subject(repo, commits[4]) == "change 5"
    # a commit made upstream after the copy is seen on the next use
    (path / "NEWS").write_text("x")
    git("add", "NEWS", cwd=path)
    git("commit", "-q", "-m", "news", cwd=path)
    head = git("rev-parse", "HEAD", cwd=path)
    repo = vcs.mirror(str(path), cache)
    assert vcs.resolve(repo, head[:10], "--bad", str(path)) == head


def test_history_refuses_unreachable_and_reversed_ends(core, tmp_path: Path) -> None:
    path, commits = core
    repo = vcs.mirror(str(path), Cache(tmp_path / "cache"))
    with pytest.raises(BadInput, match="--good 'deadbeef': no such commit in"):
        vcs.resolve(repo, "deadbeef", "--good", str(path))
    with pytest.raises(BadInput, match="would be read as a git option"):
        vcs.resolve(repo, "--upload-pack=touch", "--bad", str(path))
    with pytest.raises(BadInput, match="is not an ancestor"):
        vcs.commits_between(repo, commits[-1], commits[0], str(path))
    with pytest.raises(BadInput, match="no such repository"):
        vcs.mirror(str(tmp_path / "nowhere"), Cache(tmp_path / "cache"))


def _plugin_spec(tmp_path: Path, head: str) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    spec = tmp_path / "s.toml"
    plugin = '\n[plugin]\nname = "p"\n[plugin.source]\nkind = "path"\npath = "p"\n'
    spec.write_text(head + plugin)
    return spec


def test_cli_version_not_on_the_index_exits_2_naming_the_nearest(tmp_path: Path) -> None:
    index = Index()
    try:
        for version in ("0.25.1", "0.26.0rc1", "0.26.0"):
            index.files[f"vllm-{version}.tar.gz"] = synthcore.core_sdist(1, version)
        spec = _plugin_spec(
            tmp_path,
            spec_head().replace('kind = "sdist"', f'kind = "sdist"\nindex = "{index.url}"'),
        )
        done = vpr(
            "bisect",
            "--spec",
            str(spec),
            "--good",
            "0.25.2",
            "--bad",
            "0.26.0",
            "--dist",
            str(tmp_path / "dist"),
            "--cache-dir",
            str(tmp_path / "c"),
            check=False,
        )
    finally:
        index.close()
    assert done.returncode == 2, done.stdout + done.stderr
    out = " ".join((done.stdout + done.stderr).split())
    assert "--good 0.25.2: no such version" in out and "nearest: 0.25.1, 0.26.0rc1, 0.26.0" in out
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "dist").exists()  # nothing written


def test_cli_unreachable_commit_exits_2(core, tmp_path: Path) -> None:
    path, commits = core
    spec = _plugin_spec(tmp_path, spec_head())
    done = vpr(
        "bisect",
        "--spec",
        str(spec),
        "--repo",
        str(path),
        "--good",
        commits[0],
        "--bad",
        "f" * 40,
        "--dist",
        str(tmp_path / "dist"),
        "--cache-dir",
        str(tmp_path / "c"),
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"--bad '{'f' * 40}': no such commit in {path}" in " ".join(
        (done.stdout + done.stderr).split()
    )
    assert "Traceback" not in done.stderr


def test_the_report_round_trips_with_its_bytes() -> None:
    assert json.dumps(parse_report(REPORT).to_json()) == json.dumps(REPORT)
    # the migration report's copy carries its status beside the report's keys
    assert parse_report({"status": "run", **REPORT}) == parse_report(REPORT)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"mode": None}, "'report.mode' is missing"),
        ({"candidates": "8"}, "'candidates' is '8'"),
        ({"watched": "t::x"}, "'watched' is 't::x'"),
        ({"steps": [{"candidate": "c4"}]}, r"'steps\[0\]\.verdict' is missing"),
        ({"first_bad": {**REPORT["first_bad"], "errors": {"t::x": "boom"}}}, "errors.t::x"),
        ({"first_bad": None}, "'first_bad' is missing"),
    ],
)
def test_a_report_of_another_shape_is_refused_naming_the_key(change: dict, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        parse_report({**REPORT, **change})
