"""The API coupling diff: a plugin's uses of the core's Python API read statically, each
kind of break found against two core trees (and not found where the plugin already
follows the new core), and `vpr bump` stopping without an approval on record, going on
with one (the spec, the migration report and the manifest carry it).

The real case, Tenstorrent's plugin at e3fc849 and vLLM 0.25.1 -> 0.26.0:
tests/integration/test_apicoupling_tt_checkout.py."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import textwrap
from pathlib import Path

import pytest

from tests.support import Index, git, vpr
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform.lib import apicoupling as ac
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.flows import bump
from vllm_plugin_release.flows.bump import Approval, render_markdown

OLD = {
    "vllm/__init__.py": "from vllm.worker import Table as Table\n",
    "vllm/worker.py": """
        import abc
        from .base import Base

        class Table:
            def __init__(self, n, max_model_len=0, *, pin=False):
                self.n = n

        class Runner(Base):
            def step(self, batch, budget):
                return batch

        def helper(x, y=1):
            return x

        LIMIT = 4
    """,
    "vllm/base.py": """
        import abc

        class Base(abc.ABC):
            @abc.abstractmethod
            def step(self, batch, budget): ...
    """,
}
NEW = {
    "vllm/__init__.py": "from vllm.worker import Table as Table\n",
    "vllm/worker.py": """
        from .base import Base

        class Table:
            def __init__(self, n, max_num_blocks, *, pin=False):
                self.n = n

        class Runner(Base):
            def step(self, batch, budget, deadline):
                return batch

        def helper(x, y=1):
            return x
    """,
    "vllm/base.py": """
        import abc

        class Base(abc.ABC):
            @abc.abstractmethod
            def step(self, batch, budget, deadline): ...

            @abc.abstractmethod
            def drain(self): ...
    """,
}
PLUGIN = """
    import vllm
    from vllm import worker as w
    from vllm.worker import Runner, helper

    class MyRunner(Runner):
        def step(self, batch, budget):
            return super().step(batch, budget=budget)

    def build():
        table = vllm.Table(4, max_model_len=8)
        helper(1, y=2)
        return table, w.LIMIT
"""


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def plugin(root: Path, text: str = PLUGIN) -> Path:
    tree(root, {"src/demo_plugin/__init__.py": text,
                "tests/test_x.py": "from vllm.gone import nothing\n"})  # fmt: skip
    (root / "pyproject.toml").write_text(
        '[project]\nname = "demo-plugin"\nversion = "0.1.0"\n'
        '[project.entry-points."vllm.platform_plugins"]\ndemo = "demo_plugin:build"\n'
    )
    return root


def test_each_kind_of_break_is_found(tmp_path: Path) -> None:
    old, new = tree(tmp_path / "old", OLD), tree(tmp_path / "new", NEW)
    found = ac.coupling(plugin(tmp_path / "plugin"), old, new)
    report = found.to_json()  # the bump report's part, as written
    assert list(report) == ["status", "symbols", "unresolved", "breaking", "changes", "review"]
    assert [c.id for c in found.changes] == [c["id"] for c in report["changes"]]
    ids = [c["id"] for c in report["changes"]]
    assert ids == [
        "abstract:vllm.worker.Runner.drain",
        "keyword:vllm.Table.__init__:max_model_len",
        "removed:vllm.worker.LIMIT",
        "required:vllm.Table.__init__:max_num_blocks",
        "required:vllm.worker.Runner.step:deadline",  # the plugin's super() call
        "signature:vllm.worker.Runner.step",
    ]
    by_id = {c["id"]: c for c in report["changes"]}
    assert by_id["keyword:vllm.Table.__init__:max_model_len"]["detail"] == (
        "vllm.Table.__init__ no longer takes the keyword 'max_model_len' the plugin passes: "
        "(n, max_model_len, pin) is now (n, max_num_blocks, pin)"
    )
    assert by_id["signature:vllm.worker.Runner.step"]["uses"] == ["src/demo_plugin/__init__.py:7"]
    assert report["unresolved"] == []  # the plugin's tests are not the plugin
    assert report["breaking"] == 6


def test_no_change_and_a_plugin_that_follows_the_new_core_are_clean(tmp_path: Path) -> None:
    old = tree(tmp_path / "old", OLD)
    assert ac.coupling(plugin(tmp_path / "p1"), old, old).changes == ()
    drain = "deadline):\n            return batch\n\n        def drain(self):"
    follows = PLUGIN.replace(
        "def step(self, batch, budget):", f"def step(self, batch, budget, {drain}"
    )
    follows = follows.replace("budget=budget)", "budget=budget, deadline=deadline)")
    follows = follows.replace("max_model_len=8", "max_num_blocks=8").replace(", w.LIMIT", "")
    report = ac.coupling(plugin(tmp_path / "p2", follows), old, tree(tmp_path / "new", NEW))
    assert report.changes == () and report.to_json()["breaking"] == 0


# -- vpr bump ------------------------------------------------------------------------

SPEC = """spec_version = 1
name = "demo-0.25.1"

[core]
name = "vllm"
version = "0.25.1"
target_device = "empty"
source_date_epoch = 1750000000

[core.source]
kind = "sdist"
index = "{index}"
filename = "vllm-0.25.1.tar.gz"
sha256 = "{sha}"

[build]
python = "3.11"
backend = "local"

[plugin]
name = "demo-plugin"

[plugin.source]
kind = "path"
path = "plugin"
"""


def sdist(version: str, files: dict[str, str]) -> bytes:
    members = {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools", "torch == 2.11.0"]\n',
        "requirements/common.txt": "numpy\n",
        **{k: textwrap.dedent(v) for k, v in files.items()},
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in members.items():
            info = tarfile.TarInfo(f"vllm-{version}/{name}")
            info.size, info.mtime = len(text.encode()), 1_750_000_000
            tf.addfile(info, io.BytesIO(text.encode()))
    return buf.getvalue()


@pytest.fixture()
def project(tmp_path: Path):
    index = Index()
    index.files["vllm-0.25.1.tar.gz"] = sdist("0.25.1", OLD)
    index.files["vllm-0.26.0.tar.gz"] = sdist("0.26.0", NEW)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    plugin(tmp_path / "plugin")
    sha = hashlib.sha256(index.files["vllm-0.25.1.tar.gz"]).hexdigest()
    spec = tmp_path / "buildspec" / "demo-0.25.1.toml"
    spec.parent.mkdir()
    spec.write_text(SPEC.format(index=index.url, sha=sha))
    git("init", "-q", "-b", "main", cwd=tmp_path)  # the in-repo plugin: its committed tree
    git("add", "-A", cwd=tmp_path)
    git("commit", "-q", "-m", "the project", cwd=tmp_path)
    yield tmp_path, spec
    index.close()


def locker(request, dest: Path, find_links) -> str:
    dest.write_text("# lock\n")
    return "# lock\n"


def test_a_breaking_change_without_approval_stops_the_bump(project) -> None:
    root, spec = project
    before = sorted(p.relative_to(root) for p in root.rglob("*") if ".vpr" not in p.parts)
    with pytest.raises(GateFailed) as stopped:
        bump.bump(spec, "0.26.0", cache=Cache(root / ".vpr"), locker=locker)
    text = stopped.value.message
    assert "breaks the core API the plugin uses in 6 way(s)" in text
    assert "keyword:vllm.Table.__init__:max_model_len: vllm.Table.__init__ no longer" in text
    assert "--approve abstract:vllm.worker.Runner.drain --approve keyword:" in stopped.value.hint
    after = sorted(p.relative_to(root) for p in root.rglob("*") if ".vpr" not in p.parts)
    assert after == before  # nothing written
    # the command line: exit 1 with what to approve, the report printed under --dry-run
    done = vpr("bump", "--spec", str(spec), "--core", "0.26.0", "--dry-run", "--cache-dir",
               str(root / ".vpr"), cwd=root, check=False)  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "### Core API the plugin uses" in done.stdout and "**Not approved**" in done.stdout
    assert "needs an approval on record" in done.stderr


def test_an_approval_goes_into_the_spec_the_report_and_the_manifest(project) -> None:
    root, spec = project
    ids = [
        "abstract:vllm.worker.Runner.drain",
        "keyword:vllm.Table.__init__:max_model_len",
        "removed:vllm.worker.LIMIT",
        "required:vllm.Table.__init__:max_num_blocks",
        "required:vllm.worker.Runner.step:deadline",
        "signature:vllm.worker.Runner.step",
    ]
    partial = Approval("Rel Eng <releng@example.org>", "the plugin follows", tuple(ids[:2]))
    with pytest.raises(GateFailed, match=r"in 4 way\(s\)"):
        bump.bump(spec, "0.26.0", cache=Cache(root / ".vpr"), locker=locker, approval=partial)
    unknown = Approval("x", "y", ("removed:vllm.nothing",))
    with pytest.raises(BadInput, match="not a breaking change of this bump"):
        bump.bump(spec, "0.26.0", cache=Cache(root / ".vpr"), locker=locker, approval=unknown)
    approval = Approval("Rel Eng <releng@example.org>", "plugin commit abc follows it", tuple(ids))
    result = bump.bump(spec, "0.26.0", cache=Cache(root / ".vpr"), locker=locker,
                       approval=approval)  # fmt: skip
    new = load_spec(result.new_path)
    assert new.core.api_approval is not None
    assert new.core.api_approval.as_json() == {"from": "0.25.1", "to": "0.26.0",
                                               "by": approval.by, "why": approval.why,
                                               "changes": ids}  # fmt: skip
    assert "[core.api_approval]" in result.new_path.read_text()
    markdown = render_markdown(result)
    assert "**Approved** by Rel Eng <releng@example.org>: plugin commit abc follows it" in markdown
    # the spec loader refuses an approval carried over to another core by hand
    stale = root / "buildspec" / "stale.toml"
    stale.write_text(
        result.new_path.read_text().replace('version = "0.26.0"', 'version = "0.26.1"')
    )
    with pytest.raises(BadInput, match=r"approves the move to '0\.26\.0'"):
        load_spec(stale)
    # the manifest signs the approval (tests/pairing's records, the new spec's pins)
    from tests.pairing import make_pairing
    from vllm_plugin_release.stages import manifest as mf

    dist = root / "dist" / "demo-0.26.0"
    make_pairing(dist)
    m = mf.build_manifest(mf.pins_from_spec(new), mf.read_records(dist))
    assert m["api_approval"]["changes"] == ids and m["api_approval"]["by"] == approval.by
    json.dumps(m)


def test_the_command_line_approval_must_be_complete(project) -> None:
    root, spec = project
    done = vpr("bump", "--spec", str(spec), "--core", "0.26.0", "--approve", "x",
               "--cache-dir", str(root / ".vpr"), cwd=root, check=False)  # fmt: skip
    assert done.returncode == 2 and "--approve-by, --approve-why missing" in done.stderr
