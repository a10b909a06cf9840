"""`vpr upstream` and `vpr bump`: against a real PEP 691 index on loopback serving tiny
vLLM sdists (0.25.1, 0.26.0, 0.26.1rc1). Against the real PyPI:
tests/integration/test_bump_real_index.py."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from tests.support import Index, vpr
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.edges.index import IndexFile
from vllm_plugin_release.flows import bump, upstream
from vllm_plugin_release.flows.bump import render_markdown

OLD_EPOCH = 1_750_000_000
NEW_EPOCH = 1_760_000_000
COMMON_OLD = b"""\
regex # Replace re for higher-performance regex matching
numpy
transformers >= 4.56.0
diskcache == 5.6.3
lark == 1.2.2
xgrammar >= 0.1.0; platform_machine == "x86_64"
"""
COMMON_NEW = b"""\
regex # Replace re for higher-performance regex matching
numpy
transformers >= 5.5.3
lark == 1.2.2
xgrammar >= 0.1.0; platform_machine == "x86_64" or platform_machine == "aarch64"
anthropic >= 0.71.0
"""


def pyproject(torch: str) -> bytes:
    return (
        '[build-system]\nrequires = ["setuptools>=77.0.3", "wheel", '
        f'"torch == {torch}"]\nbuild-backend = "setuptools.build_meta"\n'
    ).encode()


def sdist(version: str, members: dict[str, bytes], mtime: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(f"vllm-{version}/{name}")
            info.size = len(data)
            info.mtime = mtime
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


SPEC_TEXT = """\
# Demo pairing pinned to vLLM 0.25.1 (a comment that names the old version).
spec_version = 1
name = "demo-0.25.1"
description = "vLLM 0.25.1 (empty target), no plugin"

[core]
name = "vllm"
version = "0.25.1"
target_device = "empty"
# Newest file time inside vllm-0.25.1.tar.gz ({old_when} UTC).
source_date_epoch = {old_epoch}

[core.source]
kind = "sdist"
index = "{index}"      # the loopback index
filename = "vllm-0.25.1.tar.gz"
sha256 = "{sha}"

[build]
python = "3.11"
backend = "local"          # kept as is
constraints = "constraints/build-core-py311.txt"
torch = "2.13.0+cpu"
"""


@pytest.fixture()
def index():
    idx = Index()
    idx.files["vllm-0.25.1.tar.gz"] = sdist(
        "0.25.1",
        {"pyproject.toml": pyproject("2.10.0"), "requirements/common.txt": COMMON_OLD},
        OLD_EPOCH,
    )
    idx.files["vllm-0.26.0.tar.gz"] = sdist(
        "0.26.0",
        {"pyproject.toml": pyproject("2.11.0"), "requirements/common.txt": COMMON_NEW},
        NEW_EPOCH,
    )
    idx.files["vllm-0.26.0-cp38-abi3-manylinux1_x86_64.whl"] = b"not really a wheel"
    idx.files["vllm-0.26.1rc1.tar.gz"] = sdist(
        "0.26.1rc1",
        {"pyproject.toml": pyproject("2.11.0"), "requirements/common.txt": COMMON_NEW},
        NEW_EPOCH,
    )
    yield idx
    idx.close()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture()
def project(tmp_path: Path, index: Index) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "buildspec").mkdir()
    text = SPEC_TEXT.format(
        index=index.url,
        sha=sha(index.files["vllm-0.25.1.tar.gz"]),
        old_epoch=OLD_EPOCH,
        old_when=bump._utc(OLD_EPOCH),
    )
    (tmp_path / "buildspec" / "demo-0.25.1.toml").write_text(text)
    return tmp_path


def run(project: Path, *args: str, check: bool = True):
    cache = ("--cache-dir", str(project / ".vpr")) if args[0] == "bump" else ()
    return vpr(*args, *cache, cwd=project, check=check)


def files_under(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".vpr" not in p.parts
    }


# -- upstream ------------------------------------------------------------------------


def test_upstream_lists_final_releases_after_the_pin(project: Path, index: Index) -> None:
    spec = "buildspec/demo-0.25.1.toml"
    done = run(project, "upstream", "--spec", spec, "--json")
    doc = json.loads(done.stdout)
    assert doc["pinned"] == "0.25.1"
    assert [r["version"] for r in doc["releases"]] == ["0.26.0"]
    release = doc["releases"][0]
    assert release["filename"] == "vllm-0.26.0.tar.gz"
    assert release["sha256"] == sha(index.files["vllm-0.26.0.tar.gz"])
    assert release["files"] == 2  # the sdist and the wheel

    pre = json.loads(
        run(project, "upstream", "--spec", spec, "--json", "--include-prereleases").stdout
    )
    assert [r["version"] for r in pre["releases"]] == ["0.26.0", "0.26.1rc1"]

    text = run(project, "upstream", "--spec", spec).stdout
    assert "newer than 0.25.1" in text and f"sha256:{release['sha256']}" in text


def test_upstream_github_output_and_one_version(project: Path, tmp_path: Path) -> None:
    out = tmp_path / "gh-output"
    out.write_text("")
    spec = "buildspec/demo-0.25.1.toml"
    done = vpr(
        "upstream",
        "--spec",
        spec,
        "--version",
        "",
        "--github-output",
        cwd=project,
        env={"GITHUB_OUTPUT": str(out)},
    )
    assert done.returncode == 0
    assert 'versions=["0.26.0"]' in out.read_text() and "count=1" in out.read_text()
    assert "pinned=0.25.1" in out.read_text()  # the bump job's baseline and bisect's good end
    # the version matrix's columns (a job each): no plugin to declare a lowest core, so from
    # the pinned one to the newest final release on the index
    assert out.read_text().splitlines()[3:] == [
        'columns=["0.25.1","0.26.0"]',
        "column_count=2",
        "name=demo-0.25.1",
    ]
    out.write_text("")
    lowest = vpr("upstream", "--spec", spec, "--github-output", "--lowest", "0.25.1",
                 "--newest", "0.25.1", cwd=project, env={"GITHUB_OUTPUT": str(out)})  # fmt: skip
    assert lowest.returncode == 0, lowest.stderr
    assert out.read_text().splitlines()[3:4] == ['columns=["0.25.1"]']
    # a lowest not on the index: exit 2 naming the nearest, and no line written
    out.write_text("")
    wrong = vpr("upstream", "--spec", spec, "--github-output", "--lowest", "0.24.9",
                cwd=project, env={"GITHUB_OUTPUT": str(out)}, check=False)  # fmt: skip
    assert wrong.returncode == 2 and "nearest" in wrong.stderr, wrong.stderr
    assert out.read_text() == ""
    # release candidates: listed when the workflow's variable asks for them
    rc = vpr("upstream", "--spec", spec, cwd=project, env={"VPR_UPSTREAM_PRERELEASES": "true"})
    assert (
        "0.26.1rc1" in rc.stdout
        and "0.26.1rc1" not in run(project, "upstream", "--spec", spec).stdout
    )
    older = run(project, "upstream", "--spec", spec, "--version", "0.25.0", check=False)
    assert older.returncode == 2 and "not newer" in older.stderr
    missing = run(project, "upstream", "--spec", spec, "--version", "0.99.0", check=False)
    assert missing.returncode == 2 and "no release 0.99.0" in missing.stderr


def test_releases_from_files_skips_yanked_and_other_projects() -> None:
    files = [
        IndexFile("vllm-0.26.0.tar.gz", "u", "a" * 64, 1, "2026-07-25T10:40:48Z"),
        IndexFile("vllm-0.26.0-cp38-abi3-manylinux1_x86_64.whl", "u", "b" * 64, 1, "2026-07-25"),
        IndexFile("vllm-0.27.0.tar.gz", "u", "c" * 64, 1, "2026-08-01", yanked=True),
        IndexFile("vllm_other-9.0.tar.gz", "u", "d" * 64, 1),
        IndexFile("vllm-0.28.0-cp38-abi3-manylinux1_x86_64.whl", "u", "e" * 64, 1, "2026-09-01"),
    ]
    found = upstream.releases_from_files("vllm", files)
    assert [r.version for r in found] == ["0.26.0", "0.28.0"]
    assert found[0].upload_time == "2026-07-25T10:40:48Z" and found[0].sha256 == "a" * 64
    assert found[1].filename is None  # wheels only: nothing to pin a source build to


# -- bump ----------------------------------------------------------------------------


def test_bump_dry_run_prints_the_diff_and_the_report_and_writes_nothing(
    project: Path, index: Index
) -> None:
    before = files_under(project)
    done = run(
        project, "bump", "--spec", "buildspec/demo-0.25.1.toml", "--core", "0.26.0", "--dry-run"
    )
    out = done.stdout
    new_sha = sha(index.files["vllm-0.26.0.tar.gz"])
    # the unified diff: old file -> the new file name (the name carries the version)
    assert "--- buildspec/demo-0.25.1.toml" in out
    assert "+++ buildspec/demo-0.26.0.toml" in out
    for line in (
        '-version = "0.25.1"',
        '+version = "0.26.0"',
        '+name = "demo-0.26.0"',
        '+filename = "vllm-0.26.0.tar.gz"',
        f'+sha256 = "{new_sha}"',
        f"+source_date_epoch = {NEW_EPOCH}",
        f"+# Newest file time inside vllm-0.26.0.tar.gz ({bump._utc(NEW_EPOCH)} UTC).",
        '+description = "vLLM 0.26.0 (empty target), no plugin"',
    ):
        assert line in out, line
    assert '+backend = "local"          # kept as is' not in out  # untouched lines stay out
    # the migration report: requirements/common.txt and [build-system].requires, old vs new
    assert "| added | `anthropic>=0.71.0` |" in out
    assert "| removed | `diskcache==5.6.3` |" in out
    assert "| re-pinned | `transformers>=4.56.0` → `transformers>=5.5.3` |" in out
    assert "`torch==2.10.0` → `torch==2.11.0`" in out
    assert "not resolved (--dry-run)" in out
    assert "not run: needs a pairing environment for each core" in out and "--with-api" in out
    assert "line 1: `# Demo pairing pinned to vLLM 0.25.1" in out  # left for a person
    assert files_under(project) == before  # nothing written (the cache aside)
    assert not (project / "constraints").exists()


def test_bump_json(project: Path) -> None:
    done = run(
        project,
        "bump",
        "--spec",
        "buildspec/demo-0.25.1.toml",
        "--core",
        "0.26.0",
        "--dry-run",
        "--json",
    )
    doc = json.loads(done.stdout)
    assert doc["written"] is False
    assert doc["core"] == {"name": "vllm", "from": "0.25.1", "to": "0.26.0"}
    assert doc["source"]["source_date_epoch"] == NEW_EPOCH
    assert doc["requirements"]["removed"] == ["diskcache==5.6.3"]
    assert [c["name"] for c in doc["requirements"]["changed"]] == ["transformers", "xgrammar"]
    assert doc["build_requires"]["changed"][0]["name"] == "torch"
    assert doc["spec"]["changed"]["core.version"] == {"from": "0.25.1", "to": "0.26.0"}
    assert doc["api"]["status"] == "not run" and doc["plugin_tests"]["status"] == "not run"
    assert doc["diff"].startswith("--- ")


def test_bump_writes_the_new_spec_and_its_locks(project: Path, index: Index) -> None:
    old_file = project / "buildspec" / "demo-0.25.1.toml"
    old_text = old_file.read_text()
    (project / "constraints").mkdir()
    lock = project / "constraints" / "build-core-py311.txt"
    lock.write_text("# old lock\nsetuptools==80.0.0 \\\n    --hash=sha256:00\ntorch==2.13.0+cpu\n")
    calls = []

    def locker(request, dest: Path, find_links) -> str:
        calls.append((request, dest))
        text = "# new lock\nsetuptools==80.9.0 \\\n    --hash=sha256:11\ntorch==2.13.0+cpu\n"
        dest.write_text(text)
        return text

    result = bump.bump(old_file, "0.26.0", cache=Cache(project / ".vpr"), locker=locker)
    new_file = project / "buildspec" / "demo-0.26.0.toml"
    assert result.written and result.new_path == new_file
    assert old_file.read_text() == old_text  # the versioned file is kept
    new_text = new_file.read_text()
    spec = load_spec(new_file)
    assert spec.name == "demo-0.26.0" and spec.core.version == "0.26.0"
    assert spec.core.source.sha256 == sha(index.files["vllm-0.26.0.tar.gz"])
    assert spec.core.source_date_epoch == NEW_EPOCH
    # every comment survives, in order; only the epoch comment is rewritten
    old_comments = [line for line in old_text.splitlines() if "#" in line]
    new_comments = [line for line in new_text.splitlines() if "#" in line]
    assert len(old_comments) == len(new_comments)
    changed = [(a, b) for a, b in zip(old_comments, new_comments) if a != b]
    assert len(changed) == 1 and "vllm-0.26.0.tar.gz" in changed[0][1]
    keys = [line.split("=")[0].strip() for line in new_text.splitlines() if "=" in line]
    assert keys == [line.split("=")[0].strip() for line in old_text.splitlines() if "=" in line]
    # the lock was resolved for the new core's build requirements, then moved in place
    ((request, dest),) = calls
    assert "torch==2.13.0+cpu" in request.requirements and dest.name.endswith(".bump")
    assert "vLLM 0.26.0 declares 'torch==2.11.0'" in request.notes[0]
    assert lock.read_text().startswith("# new lock") and not dest.exists()
    pins = result.report["locks"][0]["pins"]
    assert pins["changed"] == {"setuptools": {"from": "80.0.0", "to": "80.9.0"}}
    assert "### Locks" in render_markdown(result)


def test_bump_in_place_when_the_name_has_no_version(project: Path) -> None:
    versioned = project / "buildspec" / "demo-0.25.1.toml"
    plain = project / "buildspec" / "demo.toml"
    plain.write_text(versioned.read_text().replace('name = "demo-0.25.1"', 'name = "demo"'))
    versioned.unlink()

    def locker(request, dest: Path, find_links) -> str:
        dest.write_text("# lock\n")
        return "# lock\n"

    result = bump.bump(plain, "0.26.0", cache=Cache(project / ".vpr"), locker=locker)
    assert result.new_path == plain and load_spec(plain).core.version == "0.26.0"
    assert load_spec(plain).name == "demo"
    assert "name" not in result.report["spec"]["changed"]


def test_bump_refuses_bad_versions_and_mismatched_hashes(project: Path, index: Index) -> None:
    spec = "buildspec/demo-0.25.1.toml"
    before = files_under(project)
    same = run(project, "bump", "--spec", spec, "--core", "0.25.1", check=False)
    assert same.returncode == 2 and "is not newer" in same.stderr
    gone = run(project, "bump", "--spec", spec, "--core", "0.30.0", check=False)
    assert gone.returncode == 2 and "no sdist for vllm 0.30.0" in gone.stderr
    index.listed_sha["vllm-0.26.0.tar.gz"] = "0" * 64  # the index lists a hash the file lacks
    bad = run(project, "bump", "--spec", spec, "--core", "0.26.0", check=False)
    assert bad.returncode == 1 and "sha256 mismatch" in bad.stderr
    assert files_under(project) == before


def test_requirements_diff_groups_by_name() -> None:
    diff = bump.requirements_diff(
        ["a==1", "b>=2; python_version < '3.12'", "b>=3; python_version >= '3.12'", "c"],
        ["A==2", "b>=2; python_version < '3.12'", "b>=3; python_version >= '3.12'", "d"],
    )
    assert diff["added"] == ["d"] and diff["removed"] == ["c"]
    assert diff["changed"] == [{"name": "a", "from": ["a==1"], "to": ["A==2"]}]
    assert diff["unchanged"] == 1


def test_pr_body_has_the_report_and_the_scorecard(project: Path) -> None:
    spec = "buildspec/demo-0.25.1.toml"
    report = project / "migration.md"
    run(project, "bump", "--spec", spec, "--core", "0.26.0", "--dry-run", "--report", str(report))
    dist = project / "dist"
    body = vpr("pr-body", "--spec", spec, "--report", str(report), "--dist", str(dist), cwd=project)
    assert "## Migration report: vllm 0.25.1 → 0.26.0" in body.stdout
    assert "No scorecard: the CPU pipeline did not reach conformance" in body.stdout
    (dist / "demo-0.25.1").mkdir(parents=True)
    (dist / "demo-0.25.1" / "scorecard.md").write_text("# Scorecard: demo\n\n**Verdict: pilot**\n")
    out = project / "body.md"
    vpr(
        "pr-body",
        "--spec",
        spec,
        "--report",
        str(report),
        "--dist",
        str(dist),
        "--out",
        str(out),
        cwd=project,
    )
    assert "**Verdict: pilot**" in out.read_text() and "Migration report" in out.read_text()
    assert "Release lag" not in out.read_text()  # no cadence figure: none is made up
    # the cadence check's lag and the bisection report join the body when the run made them
    from vllm_plugin_release.conform import CheckResult
    from vllm_plugin_release.conform.scorecard import scorecard

    cadence = CheckResult("cadence", "pass", "ok", details={"lag_minor": 1, "lag_days": 26})
    card = scorecard(
        [cadence],
        runner="cpu",
        pairing={
            "name": "demo",
            "core": "vllm 0.1",
            "plugin": "plug 0.1",
            "core_wheel_sha256": None,
            "plugin_wheel_sha256": None,
        },
    )
    (dist / "demo-0.25.1" / "scorecard.json").write_text(json.dumps(card))
    (dist / "demo-0.25.1" / "bisect.md").write_text("### Bisection: 0.25.1 (good) .. 0.26.0\n")
    body = vpr("pr-body", "--spec", spec, "--report", str(report), "--dist", str(dist), cwd=project)
    text = body.stdout
    assert "Release lag of the pinned core: 26 days, 1 minor." in text
    assert text.index("Migration report") < text.index("### Bisection") < text.index("Verdict")


def test_bump_a_git_source_pins_the_new_tags_commit(tmp_path: Path) -> None:
    from tests.support import git

    repo = tmp_path / "vllm-src"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    commits = {}
    for version, torch, common, date in (
        ("0.25.1", "2.10.0", COMMON_OLD, "2026-07-14T08:00:00Z"),
        ("0.26.0", "2.11.0", COMMON_NEW, "2026-07-25T10:00:00Z"),
    ):
        (repo / "requirements").mkdir(exist_ok=True)
        (repo / "requirements" / "common.txt").write_bytes(common)
        (repo / "pyproject.toml").write_bytes(pyproject(torch))
        git("add", "-A", cwd=repo)
        git("commit", "-qm", version, cwd=repo, date=date)
        git("tag", "-a", f"v{version}", "-m", version, cwd=repo, date=date)
        commits[version] = git("rev-parse", "HEAD", cwd=repo)
    project = tmp_path / "p"
    (project / "buildspec").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    spec = project / "buildspec" / "git.toml"
    spec.write_text(
        'spec_version = 1\nname = "git"\n\n[core]\nname = "vllm"\nversion = "0.25.1"\n'
        'target_device = "empty"\nsource_date_epoch = 1784016000\n\n[core.source]\n'
        f'kind = "git"\nurl = "{repo}"\ntag = "v0.25.1"\ncommit = "{commits["0.25.1"]}"\n\n'
        '[build]\npython = "3.11"\nbackend = "local"\n'
    )
    result = bump.bump(
        spec, "0.26.0", cache=Cache(project / ".vpr"), options=bump.BumpOptions(dry_run=True)
    )
    assert f'+commit = "{commits["0.26.0"]}"' in result.diff
    assert '+tag = "v0.26.0"' in result.diff
    assert "+source_date_epoch = 1784973600" in result.diff  # the commit time of v0.26.0
    assert result.report["requirements"]["removed"] == ["diskcache==5.6.3"]
    assert not result.written and "v0.25.1" in spec.read_text()


def test_requested_analysis_that_cannot_run_is_reported_not_hidden(project: Path) -> None:
    spec = "buildspec/demo-0.25.1.toml"
    done = run(
        project,
        "bump",
        "--spec",
        spec,
        "--core",
        "0.26.0",
        "--dry-run",
        "--json",
        "--with-api",
        check=False,
    )
    doc = json.loads(done.stdout)
    assert done.returncode == 2  # the spec names no plugin: no pairing environment to build
    assert doc["api"]["status"] == "error" and "no [plugin]" in doc["api"]["reason"]
    assert doc["plugin_tests"]["status"] == "not run"
    assert doc["diff"]  # the diff and the rest of the report are still there


def _floor_project(project: Path, index: Index, requires: str) -> Path:
    """The demo spec with a runtime that loads on 3.11 and 3.12, and a release 0.27.0 whose
    Requires-Python is `requires`."""
    index.files["vllm-0.27.0.tar.gz"] = sdist(
        "0.27.0",
        {
            "pyproject.toml": pyproject("2.11.0"),
            "requirements/common.txt": COMMON_NEW,
            "PKG-INFO": f"Metadata-Version: 2.1\nRequires-Python: {requires}\n".encode(),
        },
        NEW_EPOCH,
    )
    path = project / "buildspec" / "demo-0.25.1.toml"
    text = path.read_text().replace(
        'torch = "2.13.0+cpu"', 'torch = { "3.11" = "2.13.0+cpu", "3.12" = "2.13.0" }'
    )
    path.write_text(text + '\n[runtime]\nname = "demo-rt"\npython = ["3.11", "3.12"]\n')
    return path


def test_bump_moves_the_python_when_the_core_floor_passes_it(project: Path, index: Index) -> None:
    old_file = _floor_project(project, index, ">=3.12")
    calls = []

    def locker(request, dest: Path, find_links) -> str:
        calls.append(request)
        dest.write_text("# new lock\n")
        return "# new lock\n"

    result = bump.bump(old_file, "0.27.0", cache=Cache(project / ".vpr"), locker=locker)
    spec = load_spec(result.new_path)
    assert spec.build.python == "3.12" and spec.build.torch == "2.13.0"
    assert spec.build.constraints == "constraints/build-core-py312.txt"
    move = result.report["python"]
    assert (move["requires"], move["from"], move["to"]) == (">=3.12", "3.11", "3.12")
    assert result.report["spec"]["changed"]["build.python"] == {"from": "3.11", "to": "3.12"}
    assert [r.python for r in calls] == ["3.12"]  # the lock resolved for the new Python
    text = render_markdown(result)
    assert "The Python floor moved past the spec's 3.11" in text
    assert "Requires-Python `>=3.12`" in text


def test_bump_refuses_a_core_no_python_of_the_spec_can_load(project: Path, index: Index) -> None:
    old_file = _floor_project(project, index, ">=3.13")
    before = files_under(project)
    done = run(project, "bump", "--spec", str(old_file), "--core", "0.27.0", check=False)
    assert done.returncode == 2, done.stderr
    assert (
        "vllm 0.27.0 cannot be paired" in done.stderr
        and "accepts none of 3.11, 3.12" in done.stderr
    )
    assert files_under(project) == before
