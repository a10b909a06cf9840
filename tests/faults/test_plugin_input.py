"""A hostile plugin tree against the analysers: the installer analysis stays inside the
plugin tree and never copies a file from outside it into the evidence (D6); every
analyser ends soon on a large or tangled input, saying what it did not read (D8); a
deeply nested tree or a broken uv.lock is a clear message, not a traceback (D9).

Each case is a real plugin tree made by the test (a git checkout where the CLI reads it)
and the real check; the time bound is pytest-timeout's, generous (the inputs took
minutes before their fix, and take well under a second now)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import git, spec_head, vpr
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform.checks import pinning

SECRET = "hunter2-SECRET-token"


def _secrets(outside: Path) -> dict[str, Path]:
    """Files outside the plugin tree that an installer may name; each holds the secret."""
    outside.mkdir()
    files = {
        "sourced": outside / "env.sh",
        "requirements": outside / "reqs.txt",
        "linked": outside / "linked.sh",
    }
    files["sourced"].write_text(f"export TOKEN={SECRET}\npip install {SECRET}-pkg\n")
    files["requirements"].write_text(f"{SECRET}-req\n")
    files["linked"].write_text(f"pip install {SECRET}-linked\n")
    return files


def _plugin_spec(tmp_path: Path, root: Path, kind_git: str | None = None) -> Path:
    """A spec whose installer is `scripts/install.sh` of the plugin at `root`."""
    source = (
        f'\n[plugin.source]\nkind = "git"\nurl = "{root}"\ncommit = "{kind_git}"\n'
        if kind_git
        else f'\n[plugin.source]\nkind = "path"\npath = "{root.name}"\n'
    )
    spec = tmp_path / "spec.toml"
    spec.write_text(
        spec_head()
        + '\n[plugin]\nname = "vllm-hostile"\ninstaller = "scripts/install.sh"\n'
        + source
    )
    return spec


def _check_pinning(spec: Path, work: Path):
    """`vpr check pinning --json` in a subprocess, its cache and dist under `work`: the
    run and all it said (never a traceback)."""
    done = vpr(
        "check", "pinning", "--spec", str(spec), "--json",
        "--cache-dir", str(work / "cache"), "--dist", str(work / "dist"),
        cwd=spec.parent, check=False,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert "Traceback" not in said, said[-3000:]
    return done, said


def _commit(folder: Path) -> str:
    """`folder` as a git repository with one commit (links kept as links)."""
    git("init", "-q", "-b", "main", cwd=folder)
    git("add", ".", cwd=folder)
    git("commit", "-q", "-m", "hostile", cwd=folder, date="2026-08-01T12:00:00+00:00")
    return git("rev-parse", "HEAD", cwd=folder)


def test_installer_never_reads_outside_the_plugin_tree(tmp_path: Path) -> None:
    """`source /abs`, `-r /abs`, `-r ../../x`, `. ../x` and a link out of the checkout: the
    analysis names each as not read; no byte of those files reaches the check's output."""
    files = _secrets(tmp_path / "outside")
    plugin = tmp_path / "checkout"
    (plugin / "scripts").mkdir(parents=True)
    (plugin / "scripts" / "install.sh").write_text(
        f"source {files['sourced']}\n"
        f"pip install -r {files['requirements']}\n"
        "pip install -r scripts/reqs.txt\n"
        ". ../../outside/env.sh\n"
        "source scripts/link.sh\n"
        "export VLLM_TARGET_DEVICE=empty\n"
        "pip install --no-binary vllm vllm==0.26.0\n"
    )
    (plugin / "scripts" / "reqs.txt").write_text("-r ../../outside/reqs.txt\nnumpy==1.26.4\n")
    (plugin / "scripts" / "link.sh").symlink_to(files["linked"])
    (plugin / "pyproject.toml").write_text('[project]\nname = "vllm-hostile"\nversion = "1"\n')
    spec = _plugin_spec(tmp_path, plugin, kind_git=_commit(plugin))
    done, said = _check_pinning(spec, tmp_path)
    assert done.returncode in (0, 1), said
    assert SECRET not in said
    result = json.loads(done.stdout)
    # the in-tree part is a good installer; the files named outside it are missing (warn)
    assert result["status"] == "warn", result["summary"]
    details = result["details"]
    assert not any("outside" in f for f in details["files_read"]), details["files_read"]
    notes = "\n".join(details["notes"])
    for target in (files["sourced"], "../../outside/env.sh", "scripts/link.sh"):
        assert f"{target} is not in the plugin tree; not read" in notes, notes
    missing = {m["file"]: m for m in details["missing"]}
    assert str(files["requirements"]) in missing, missing
    assert "../../outside/reqs.txt" in missing, missing


def test_installer_named_by_the_spec_may_not_link_out(tmp_path: Path) -> None:
    """The spec's installer itself a link to a file outside: a failure naming it, unread."""
    files = _secrets(tmp_path / "outside")
    root = tmp_path / "plugin"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "install.sh").symlink_to(files["linked"])
    spec = load_spec(_plugin_spec(tmp_path, root))
    result = pinning.check(spec, root)
    assert result.status == "fail"
    assert "scripts/install.sh is missing" in result.summary + " ".join(result.details["failures"])
    assert SECRET not in json.dumps(result.details) + json.dumps([e.note for e in result.evidence])
    assert result.details["missing"][0]["error"] == "outside the plugin tree; not read"


@pytest.mark.timeout(60)
def test_installer_fifo_is_not_opened(tmp_path: Path) -> None:
    """A fifo where a sourced script should be: never opened (opening it would wait forever)."""
    import os

    root = tmp_path / "plugin"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "install.sh").write_text(
        "source scripts/pipe.sh\npip install vllm==0.26.0\n"
    )
    os.mkfifo(root / "scripts" / "pipe.sh")
    spec = load_spec(_plugin_spec(tmp_path, root))
    result = pinning.check(spec, root)
    assert "scripts/pipe.sh is not a regular file; not read" in "\n".join(result.details["notes"])


# ---------------------------------------------------------------------------
# D9: a plugin tree nested deeper than Python's recursion limit.

DEEP = 1100


def _deep(top: Path, depth: int = DEEP) -> Path:
    """`top/d/d/.../d` (`depth` folders, made one by one: os.makedirs recurses too), with a
    doc at the bottom; returns the bottom folder."""
    folder = top
    folder.mkdir(parents=True, exist_ok=True)
    for _ in range(depth):
        folder = folder / "d"
        folder.mkdir()
    (folder / "deep.md").write_text("Run with `vllm serve -tp 2`.\n")
    return folder


def test_tree_manifest_of_a_very_deep_tree(deep_tmp: Path) -> None:
    tmp_path = deep_tmp
    """The cache's manifest of a tree 1,100 folders deep: written, checked, and a change
    at the bottom is seen (no RecursionError)."""
    from vllm_plugin_release.core.cache import tree_digest, tree_intact, write_tree_manifest

    bottom = _deep(tmp_path / "tree")
    write_tree_manifest(tmp_path / "tree")
    assert tree_intact(tmp_path / "tree")
    digest = tree_digest(tmp_path / "tree")
    assert ("d/" * DEEP + "deep.md") in digest
    (bottom / "deep.md").write_text("changed\n")
    assert not tree_intact(tmp_path / "tree")


def test_hardware_docs_walk_a_very_deep_tree(deep_tmp: Path) -> None:
    tmp_path = deep_tmp
    from vllm_plugin_release.conform.lib import doctext

    _deep(tmp_path / "plugin" / "docs")
    found = doctext.doc_files(tmp_path / "plugin", ["docs/**/*"])
    assert [p.name for p in found] == ["deep.md"]


@pytest.mark.timeout(300)
def test_in_repo_plugin_tree_very_deep_via_cli(deep_tmp: Path) -> None:
    tmp_path = deep_tmp
    """A kind = "path" plugin 1,100 folders deep: exported, extracted and checked by the
    real CLI with a clear verdict (before: a minute of extraction, then a RecursionError)."""
    repo = tmp_path / "repo"
    plugin = repo / "plugin"
    (plugin / "scripts").mkdir(parents=True)
    (plugin / "scripts" / "install.sh").write_text(
        "export VLLM_TARGET_DEVICE=empty\npip install --no-binary vllm vllm==0.26.0\n"
    )
    _deep(plugin / "docs")
    _commit(repo)
    spec = _plugin_spec(repo, plugin)
    done, said = _check_pinning(spec, tmp_path)
    assert done.returncode == 0, said[-3000:]
    assert json.loads(done.stdout)["status"] == "pass"


# ---------------------------------------------------------------------------
# D8: docs built to make a pattern rescan the rest of a line from each of many starts.

DOC_BYTES = 512 * 1024
HOSTILE_DOCS = {
    "emphasis never closed": "*a ",
    "initials": "A. ",
    "brackets never closed": "[a ",
    "tags never closed": "<a ",
    "link targets never closed": "[a](",
    "one term, no verb": "prefill ",
    "a run of dots": ".",
    "a run of dashes": "-",  # the workload check's `--[\w-]*model` tried from each dash
    "a run of blanks": None,  # one line: a word, blanks, a word
}


def _hostile_doc(unit: str | None) -> str:
    if unit is None:
        return "Prefill" + " " * DOC_BYTES + "and decode mix.\n"
    return (unit * (DOC_BYTES // len(unit) + 1))[:DOC_BYTES]


HW_TABLE = """
[conformance.hardware]
parallelism = "mesh"
mesh_variable = "MESH_DEVICE"
mesh_device = "T3K"
device_glob = "/dev/tenstorrent/*"
"""


@pytest.mark.timeout(120)  # a rescan from every start ends here with a stack, not a hang
@pytest.mark.parametrize("shape", list(HOSTILE_DOCS))
def test_docs_checks_are_linear_in_the_doc(tmp_path: Path, shape: str) -> None:
    from vllm_plugin_release.conform.checks import hardware_docs as hardwaredocs
    from vllm_plugin_release.conform.checks import scheduler as scheddocs
    from vllm_plugin_release.conform.checks import workload

    root = tmp_path / "plugin"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "SCHEDULING.md").write_text(_hostile_doc(HOSTILE_DOCS[shape]))
    spec_file = _plugin_spec(tmp_path, root)
    spec_file.write_text(spec_file.read_text() + HW_TABLE)
    spec = load_spec(spec_file)
    hw = hardwaredocs.check(spec, root)
    assert hw.details["docs"] == ["docs/SCHEDULING.md"], hw.summary
    sched = scheddocs.check(spec, root)
    assert sched.status in ("pass", "warn", "fail")
    files, _ = workload.read_models(root)
    assert files == ["docs/SCHEDULING.md"]


def test_docs_beyond_the_total_are_named_not_read(tmp_path: Path) -> None:
    from vllm_plugin_release.conform.checks import hardware_docs as hardwaredocs
    from vllm_plugin_release.conform.lib import doctext

    root = tmp_path / "plugin"
    (root / "docs").mkdir(parents=True)
    for i in range(10):
        (root / "docs" / f"part{i}.md").write_text("Plain words. " * (DOC_BYTES // 13))
    spec_file = _plugin_spec(tmp_path, root)
    spec_file.write_text(spec_file.read_text() + HW_TABLE)
    result = hardwaredocs.check(load_spec(spec_file), root)
    read, left = result.details["docs"], result.details["not_read"]
    assert len(read) >= doctext.MAX_TOTAL_BYTES // DOC_BYTES and left
    assert sorted(read + left) == [f"docs/part{i}.md" for i in range(10)]
    notes = [e.note for e in result.evidence]
    assert any(n.startswith("the docs hold more than 4 MiB: analysed the first") for n in notes)


def test_scheduler_docs_may_not_link_out(tmp_path: Path) -> None:
    from vllm_plugin_release.conform.checks import scheduler as scheddocs

    files = _secrets(tmp_path / "outside")
    files["linked"].write_text(f"The plugin never mixes prefill and decode ({SECRET}).\n")
    root = tmp_path / "plugin"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "SCHEDULING.md").symlink_to(files["linked"])
    result = scheddocs.check(load_spec(_plugin_spec(tmp_path, root)), root)
    assert result.status == "fail"
    assert "docs/SCHEDULING.md outside the plugin tree; not read" in result.summary
    assert SECRET not in json.dumps(result.to_json())


# ---------------------------------------------------------------------------
# D8: installers whose loops, branches, sourced scripts or lists multiply the work.

GOOD_TAIL = "export VLLM_TARGET_DEVICE=empty\npip install --no-binary vllm vllm==0.26.0\n"


def _nested_requirements(depth: int) -> dict[str, str]:
    files = {f"r{i}.txt": f"-r r{i + 1}.txt\npkg{i}==1\n" for i in range(depth)}
    return {**files, f"r{depth}.txt": "numpy==1.26.4\n"}


HOSTILE_INSTALLERS: dict[str, tuple[str, dict[str, str], bool]] = {
    # name: (installer, other files, whether the analysis must stop and say where)
    "ten nested for loops": (
        "".join(f"for v{i} in a b c d e f g h; do\n" for i in range(10))
        + GOOD_TAIL
        + "done\n" * 10,
        {},
        False,
    ),
    "blocks nested 1,000 deep": (
        "".join(f"if [ -f $X{i} ]; then\n" for i in range(1000)) + GOOD_TAIL + "fi\n" * 1000,
        {},
        True,
    ),
    "variables times branches": (
        "".join(f"V{i}=x\n" for i in range(3000))
        + "".join(f"if [ -f $X ]; then A{i}=1; fi\n" for i in range(3000))
        + GOOD_TAIL,
        {},
        True,
    ),
    "a script sourcing itself": (
        "source scripts/again.sh\n" + GOOD_TAIL,
        {"scripts/again.sh": "source scripts/again.sh\n" * 1000},
        True,
    ),
    "case blocks": (
        "".join(f"case $X in\n a) B{i}=1;;\n b) C{i}=2;;\nesac\n" for i in range(4000)) + GOOD_TAIL,
        {},
        True,
    ),
    "requirement files nested 1,000 deep": (
        "pip install -r r0.txt\n" + GOOD_TAIL,
        _nested_requirements(1000),
        False,
    ),
    "a pyproject with 20,000 dependencies": (
        "pip install .\n" + GOOD_TAIL,
        {
            "pyproject.toml": "[project]\nname = 'x'\nversion = '1'\ndependencies = [\n"
            + "".join(f'  "pkg{i}==1",\n' for i in range(20000))
            + "]\n"
        },
        False,
    ),
    "a uv.lock with 20,000 core entries": (
        "export VLLM_TARGET_DEVICE=empty\nuv sync --frozen\n",
        {
            "pyproject.toml": "[project]\nname = 'x'\nversion = '1'\n",
            "uv.lock": "version = 1\n"
            + "".join(
                f'[[package]]\nname = "vllm"\nversion = "0.{i}"\n'
                'source = { registry = "https://pypi.org/simple" }\n'
                for i in range(20000)
            ),
        },
        False,
    ),
    "5,000 clones, each installed from its folder": (
        "".join(
            f"git clone https://example.invalid/r{i} /src/r{i}\npip install /src/r{i}\n"
            for i in range(5000)
        )
        + GOOD_TAIL,
        {},
        True,  # past 1,000 clones the rest are not judged, and the check says so
    ),
    "a requirement line of 500,000 blanks": (
        "pip install -r r.txt\n" + GOOD_TAIL,
        {"r.txt": "numpy" + " " * 500_000 + "==1.26.4\n"},
        False,
    ),
}


@pytest.mark.timeout(120)  # work that multiplies ends here with a stack, not a hang
@pytest.mark.parametrize("shape", list(HOSTILE_INSTALLERS))
def test_installer_analysis_is_bounded(tmp_path: Path, shape: str) -> None:
    installer, files, stops = HOSTILE_INSTALLERS[shape]
    root = tmp_path / "plugin"
    for name, text in {"scripts/install.sh": installer, **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    result = pinning.check(load_spec(_plugin_spec(tmp_path, root)), root)
    incomplete = result.details["incomplete"]
    if stops:
        assert result.status == "fail" and incomplete, result.summary
        assert "simplify the installer" in result.summary
        assert incomplete[0].startswith(("scripts/install.sh:", "scripts/again.sh:"))
    else:
        assert not incomplete, incomplete
        assert result.details["core_pin"] is not None, result.summary


def test_uv_lock_with_a_broken_url_or_deep_nesting_is_named(tmp_path: Path) -> None:
    """D9: a git source `https://[::1/...` and arrays nested 600 deep: each a message
    naming uv.lock (and the line), not a traceback."""
    root = tmp_path / "plugin"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "install.sh").write_text("uv sync --frozen\n")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\nversion = '1'\n")
    spec = load_spec(_plugin_spec(tmp_path, root))
    for lock, error in (
        (
            '[[package]]\nname = "vllm"\nversion = "0.26.0"\n'
            'source = { git = "https://[::1/vllm?rev=v0.26.0#abc" }\n',
            "uv.lock:2: [[package]] vllm: its source URL cannot be read (Invalid IPv6 URL)",
        ),
        ("x = " + "[" * 600 + "]" * 600 + "\n", "uv.lock: arrays or tables nested too deep"),
    ):
        (root / "uv.lock").write_text(lock)
        result = pinning.check(spec, root)
        missing = [m for m in result.details["missing"] if m["file"] == "uv.lock"]
        assert missing and missing[0]["error"].startswith(error), result.details["missing"]


# ---------------------------------------------------------------------------
# The plugin's test files, read to find those that need the vendor runtime.


@pytest.mark.timeout(60)
def test_test_scan_survives_hostile_test_files(deep_tmp: Path) -> None:
    """An expression too deep for Python's AST builder, a fifo named like a test, a link
    to a test file outside the tree and a tests folder 1,100 deep: each is passed over
    (a RecursionError, a wait forever and a RecursionError before); a real runtime import
    beside them is still found."""
    import os

    from vllm_plugin_release.conform.lib.testscan import runtime_importers

    root = deep_tmp / "plugin"
    tests = root / "tests"
    tests.mkdir(parents=True)
    (tests / "test_deep_expr.py").write_text("x = " + "+".join(["a"] * 20000) + "\n")
    os.mkfifo(tests / "test_fifo.py")
    outside = deep_tmp / "outside_test.py"
    outside.write_text("import vendor_sdk\n")
    (tests / "test_link_out.py").symlink_to(outside)
    bottom = _deep(tests)
    (bottom / "test_needs.py").write_text("import vendor_sdk\n")
    found = runtime_importers(root, ["tests"], [], "vendor_sdk")
    assert found == ["tests/" + "d/" * DEEP + "test_needs.py"]


@pytest.mark.timeout(60)  # decoding the whole line again at each hit ends here
def test_symbol_scan_of_one_long_line_with_many_hits(tmp_path: Path) -> None:
    """A 1 MiB file of one non-ASCII line holding 150,000 vendor symbols: every hit is
    located and classified in one pass over the line."""
    from vllm_plugin_release.conform.lib.symbols import scan_tree

    unit = "é ttnn("
    (tmp_path / "f.py").write_text((unit * (2**20 // len(unit) + 1))[: 2**20])
    report = scan_tree(tmp_path, ["ttnn"])
    hits = report.hits
    assert len(hits) == 2**20 // len(unit)
    assert (hits[0].column, hits[-1].column) == (3, (len(hits) - 1) * len(unit) + 3)  # 1-based


def test_what_the_installer_fuzzer_found(tmp_path: Path) -> None:
    """`-r` with no file after it (the plugin's folder was opened as a file:
    IsADirectoryError) and a NUL byte in a path (realpath: ValueError): a verdict, no
    traceback. Both found by tests/faults/test_installer_fuzz.py."""
    root = tmp_path / "plugin"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "install.sh").write_text(
        "pip install -r reqs.txt\npip install /outside/x.txt\0\nsource a\0b.sh\n" + GOOD_TAIL
    )
    (root / "reqs.txt").write_text("-r\n-c \nnumpy==1.26.4\n")
    result = pinning.check(load_spec(_plugin_spec(tmp_path, root)), root)
    assert result.status in ("pass", "warn"), result.summary
    assert result.details["core_pin"]["version"] == "0.26.0"
