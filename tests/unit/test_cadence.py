"""`cadence`: lag of the plugin behind core releases, from real git repos and a loopback index."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import ClassVar

import pytest
from packaging.version import Version

from tests.support import serve_in_thread, spec_head
from vllm_plugin_release.buildspec import model as specmod
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform.checks import cadence
from vllm_plugin_release.core.errors import BadInput

NOW = datetime(2026, 8, 20, 12, tzinfo=timezone.utc)


def day(text: str) -> datetime:
    return datetime.fromisoformat(text + "T12:00:00+00:00")


CORE = [
    (Version("0.24.0"), day("2026-06-10")),
    (Version("0.25.0"), day("2026-07-11")),
    (Version("0.25.1"), day("2026-07-14")),
    (Version("0.26.0"), day("2026-07-25")),
    (Version("0.27.0rc1"), day("2026-08-05")),
]


def git(repo: Path, *args: str, when: str | None = None) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    if when:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = when + "T12:00:00+00:00"
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def make_repo(path: Path, tags: list[tuple[str, str, bool]]) -> Path:
    """A repository with one commit per tag: (tag, date, annotated)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for i, (tag, when, annotated) in enumerate(tags):
        (path / "f.txt").write_text(str(i))
        git(path, "add", "f.txt")
        git(path, "commit", "-q", "-m", f"c{i}", when=when)
        if annotated:
            git(path, "tag", "-a", tag, "-m", tag, when=when)
        else:
            git(path, "tag", tag, when=when)
    return path


PLUGIN_TABLES = """
[plugin]
name = "vllm-demo-plugin"
{installer}

[plugin.source]
{source}
{extra}
"""


def make_spec(
    tmp_path: Path,
    extra: str = "",
    installer: str = "",
    source: str = 'kind = "path"\npath = "plugin"',
) -> specmod.Spec:
    path = tmp_path / "spec.toml"
    path.write_text(
        spec_head() + PLUGIN_TABLES.format(extra=extra, installer=installer, source=source)
    )
    return load_spec(path)


# ---------------------------------------------------------------------------
# Pure logic.


def test_one_minor_behind_passes() -> None:
    tags = [("v0.1.0", day("2026-06-01"), None), ("compat/vllm-0.25.1", day("2026-07-20"), None)]
    result = cadence.assess_cadence(CORE, tags, None, {}, now=NOW)
    assert result.status == "pass", result.summary
    d = result.details
    assert d["core_latest"] == {"version": "0.26.0", "date": "2026-07-25"}
    assert d["plugin_latest_tag"]["name"] == "compat/vllm-0.25.1"
    assert d["targeted"] == {"version": "0.25.1", "from": "tag compat/vllm-0.25.1"}
    assert d["lag_minor"] == 1
    assert d["lag_days"] == 26  # 2026-07-25 -> 2026-08-20
    # The release candidate is reported, not counted.
    assert d["core_prereleases"] == [{"version": "0.27.0rc1", "date": "2026-08-05"}]
    assert "0.27.0rc1" in result.summary


def test_two_minors_behind_fails() -> None:
    core = [*CORE, (Version("0.27.0"), day("2026-08-10"))]
    tags = [("compat/vllm-0.25.1", day("2026-07-20"), None)]
    result = cadence.assess_cadence(core, tags, None, {"max_minor_lag": 1}, now=NOW)
    assert result.status == "fail"
    assert result.details["lag_minor"] == 2
    assert "0.25.1" in result.summary and "0.27.0" in result.summary
    assert "policy allows 1" in result.summary
    # A looser policy accepts the same inputs.
    assert cadence.assess_cadence(core, tags, None, {"max_minor_lag": 2}, now=NOW).status == "pass"
    # on_violation = warn reports the same lag without gating the pairing.
    warned = cadence.assess_cadence(
        core, tags, None, {"max_minor_lag": 1, "on_violation": "warn"}, now=NOW
    )
    assert warned.status == "warn" and "policy allows 1" in warned.summary


def test_prereleases_count_only_when_asked() -> None:
    tags = [("compat/vllm-0.25.1", day("2026-07-20"), None)]
    result = cadence.assess_cadence(CORE, tags, None, {"include_prereleases": True}, now=NOW)
    assert result.status == "fail"
    assert result.details["core_latest"]["version"] == "0.27.0rc1"
    assert result.details["lag_minor"] == 2


def test_installer_pin_wins_over_tags_and_days_policy() -> None:
    tags = [("compat/vllm-0.26.0", day("2026-07-30"), None)]
    result = cadence.assess_cadence(CORE, tags, Version("0.24.0"), {}, now=NOW)
    assert result.status == "fail"
    assert result.details["targeted"] == {"version": "0.24.0", "from": "installer pin"}
    assert "compat/vllm-0.26.0 names 0.26.0" in result.details["tag_vs_installer"]
    days = cadence.assess_cadence(
        CORE, tags, "0.25.1", {"max_minor_lag": 3, "max_days_lag": 20}, now=NOW
    )
    assert days.status == "fail"
    assert "26 days" in days.summary and "policy allows 20" in days.summary
    current = cadence.assess_cadence(CORE, tags, "0.26.0", {"max_days_lag": 0}, now=NOW)
    assert current.status == "pass" and current.details["lag_days"] == 0


def test_unknown_target_fails() -> None:
    result = cadence.assess_cadence(CORE, [("v0.1.0", day("2026-06-01"), None)], None, {})
    assert result.status == "fail"
    assert "cannot tell which core version" in result.summary
    assert cadence.assess_cadence([], [], "0.26.0", {}).status == "fail"


def test_tag_pattern() -> None:
    assert cadence.core_version_in_tag("compat/vllm-0.24.0") == Version("0.24.0")
    assert cadence.core_version_in_tag("v0.3.0+vllm0.25.1") == Version("0.25.1")
    assert cadence.core_version_in_tag("vllm-v0.26.0rc2") == Version("0.26.0rc2")
    assert cadence.core_version_in_tag("v0.1.0") is None
    pattern = r"^tt-(?P<core>\d+\.\d+\.\d+)$"
    assert cadence.core_version_in_tag("tt-0.25.1", pattern) == Version("0.25.1")


# ---------------------------------------------------------------------------
# I/O against real repositories and a real (loopback) index.


def test_plugin_tags_from_git(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "plugin",
        [("v0.1.0", "2026-06-01", False), ("compat/vllm-0.25.1", "2026-07-20", True)],
    )
    tags = cadence.plugin_tags_from_git(repo)
    assert [t.name for t in tags] == ["v0.1.0", "compat/vllm-0.25.1"]
    assert tags[1].date == day("2026-07-20")
    assert tags[1].commit == git(repo, "rev-parse", "HEAD")  # annotated tag peeled
    assert tags[0].commit == git(repo, "rev-parse", "HEAD~1")
    with pytest.raises(BadInput, match="cannot list tags"):
        cadence.plugin_tags_from_git(tmp_path / "nothing")


def test_core_releases_from_git(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "core",
        [
            ("v0.25.1", "2026-07-14", True),
            ("not-a-release", "2026-07-15", False),
            ("v0.26.0", "2026-07-25", False),
        ],
    )
    releases = cadence.core_releases_from_git(repo)
    assert [(str(r.version), r.date) for r in releases] == [
        ("0.25.1", day("2026-07-14")),
        ("0.26.0", day("2026-07-25")),
    ]


def test_check_end_to_end_with_repo_and_installer(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "plugin", [("compat/vllm-0.26.0", "2026-07-30", True)])
    (root / "install.sh").write_text(
        "VLLM_TARGET_DEVICE=empty pip install --no-binary vllm vllm==0.25.1\n"
    )
    head = git(root, "rev-parse", "HEAD")
    source = f'kind = "git"\nurl = "{root}"\ncommit = "{head}"'
    spec = make_spec(tmp_path, installer='installer = "install.sh"', source=source)
    core = [*CORE, (Version("0.27.0"), day("2026-08-10"))]
    result = cadence.check(spec, root, core_releases=core, now=NOW)
    assert result.status == "fail"
    assert result.details["targeted"] == {"version": "0.25.1", "from": "installer pin"}
    assert result.details["lag_minor"] == 2
    assert result.details["plugin_latest_tag"]["name"] == "compat/vllm-0.26.0"
    (root / "install.sh").write_text(
        "VLLM_TARGET_DEVICE=empty pip install --no-binary vllm vllm==0.26.0\n"
    )
    assert cadence.check(spec, root, core_releases=core, now=NOW).status == "pass"
    # A missing installer is a note, not a crash; the tag still names the target.
    (root / "install.sh").unlink()
    result = cadence.check(spec, root, core_releases=core, now=NOW)
    assert result.status == "pass"
    assert any("install.sh is missing" in n for n in result.details["notes"])
    # A folder of this repository has no plugin tags of its own: only the installer counts.
    spec = make_spec(tmp_path, installer='installer = "install.sh"')
    result = cadence.check(spec, root, core_releases=core, now=NOW)
    assert result.status == "fail" and "cannot tell which core version" in result.summary


class _Index(http.server.BaseHTTPRequestHandler):
    files: ClassVar[list[dict]] = []

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/simple/vllm":
            self.send_error(404)
            return
        body = json.dumps({"meta": {"api-version": "1.1"}, "files": self.files}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def index() -> Iterator[str]:
    def f(name: str, when: str, yanked: bool = False) -> dict:
        return {
            "filename": name,
            "url": f"/files/{name}",
            "hashes": {"sha256": "0" * 64},
            "upload-time": when,
            "yanked": yanked,
        }

    _Index.files = [
        f("vllm-0.25.1-cp38-abi3-manylinux_2_28_x86_64.whl", "2026-07-14T08:59:06.476065Z"),
        f("vllm-0.25.1.tar.gz", "2026-07-14T08:58:23.252544Z"),
        f("vllm-0.26.0.tar.gz", "2026-07-25T10:40:48.095760Z"),
        f("vllm-0.27.0rc1.tar.gz", "2026-08-05T10:00:00Z"),
        f("vllm-0.27.0.tar.gz", "2026-08-10T21:31:22Z", yanked=True),
        f("vllm-weird-name.zip", "2026-08-11T00:00:00Z"),
    ]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    serve_in_thread(server)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


def test_core_releases_from_index(index: str, tmp_path: Path) -> None:
    releases = cadence.core_releases_from_index(index, "vllm")
    assert [str(r.version) for r in releases] == ["0.25.1", "0.26.0", "0.27.0rc1"]
    assert releases[0].date == datetime(2026, 7, 14, 8, 58, 23, 252544, tzinfo=timezone.utc)
    spec = make_spec(tmp_path, extra=f'\n[conformance.cadence]\ncore_index = "{index}"\n')
    tags = [("compat/vllm-0.25.1", day("2026-07-20"), None)]
    result = cadence.check(spec, None, plugin_tags=tags, read_installer=False, now=NOW)
    assert result.status == "pass", result.summary
    assert result.details["sources"]["core"] == f"{index}/vllm/"
    assert result.details["core_prereleases"][0]["version"] == "0.27.0rc1"


def test_bad_policy_names_the_key(tmp_path: Path) -> None:
    # The spec loader refuses a bad policy: the check's schema is part of the spec's.
    with pytest.raises(BadInput, match=r"spec\.toml:\d+: max_minor_lag must be of type integer"):
        make_spec(tmp_path, extra='\n[conformance.cadence]\nmax_minor_lag = "one"\n')
    # What a schema cannot say, the check does: tag_pattern needs a named group `core`.
    spec = make_spec(tmp_path, extra="\n[conformance.cadence]\ntag_pattern = 'vllm-(.*)'\n")
    with pytest.raises(BadInput, match="named group"):
        cadence.check(spec, None, core_releases=CORE, plugin_tags=[])


def test_as_of_is_the_utc_day_not_the_time() -> None:
    """The scorecard is cached and compared per UTC day: the time of day is not in it."""
    morning = cadence.assess_cadence(
        CORE, [], None, {}, now=datetime(2026, 8, 1, 6, tzinfo=timezone.utc)
    )
    evening = cadence.assess_cadence(
        CORE, [], None, {}, now=datetime(2026, 8, 1, 23, tzinfo=timezone.utc)
    )
    assert morning.details["as_of"] == "2026-08-01"
    assert morning.to_json() == evening.to_json()


# ---------------------------------------------------------------------------
# The vllm-project plugins' tags

RELEASES = {Version(v) for v in ("0.24.0", "0.25.1", "0.25.1rc1", "1.10.0")}


@pytest.mark.parametrize(
    ("tag", "core"),
    [
        ("v0.25.1", "0.25.1"),
        ("v0.25.1rc1", "0.25.1rc1"),
        ("compat/vllm-0.24.0", "0.24.0"),
        ("vllm-v0.24.0", "0.24.0"),
        ("v0.1.0", None),  # the plugin's own version: not a core release
        ("v2.0.0-rc.9", None),  # a plugin's own semver pre-release
        ("spyre-next-v0.1.0", None),
        ("release/v0.25.1", None),
    ],
)
def test_default_tag_forms(tag: str, core: str | None) -> None:
    found = cadence.tag_core(tag, None, RELEASES)
    assert (str(found) if found else None) == core


def test_a_spec_pattern_replaces_the_release_tag_form() -> None:
    assert cadence.tag_core("v1.10.0", None, RELEASES) == Version("1.10.0")
    assert cadence.tag_core("v1.10.0", r"^compat/vllm-(?P<core>.+)$", RELEASES) is None


def test_a_vX_Y_ZrcN_tag_names_the_target_and_the_hint_shows_the_forms() -> None:
    core = [*CORE, (Version("0.26.1rc1"), day("2026-07-30"))]
    tags = [("v0.1.0", day("2026-06-01"), None), ("v0.26.1rc1", day("2026-08-01"), None)]
    result = cadence.assess_cadence(core, tags, None, {"include_prereleases": True}, now=NOW)
    assert result.details["targeted"] == {"version": "0.26.1rc1", "from": "tag v0.26.1rc1"}
    unknown = cadence.assess_cadence(CORE, [("v2.0.0-rc.9", None, None)], None, {}, now=NOW)
    assert unknown.status == "fail" and "vX.Y.ZrcN" in unknown.summary


def test_the_lag_in_days_is_the_same_all_day_long() -> None:
    """The scorecard is deterministic for one UTC day (its certification day): the lag in
    days counts calendar days, not 24-hour spans from the release's upload time."""
    tags = [("v0.1.0", day("2026-06-01"), None), ("compat/vllm-0.25.1", day("2026-07-20"), None)]
    released = [(v, d.replace(hour=18)) for v, d in CORE]  # 0.26.0 uploaded at 18:00
    lags = {
        cadence.assess_cadence(released, tags, None, {}, now=now).details["lag_days"]
        for now in (NOW.replace(hour=1), NOW.replace(hour=12), NOW.replace(hour=23, minute=59))
    }
    assert lags == {26}  # 2026-07-25 -> 2026-08-20, whatever the hour (was 25 then 26)
