"""Command injection through a git argument: a URL, tag or ref from a spec (or the command
line) that starts with '-' is read by git as an option (`--upload-pack=CMD` runs CMD).
Every path below must refuse it with exit 2 naming the key, and the marker file that the
injected command would create must never appear. The honest calls still work against a
real local repository (the URL goes after `--`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import git, vpr
from vllm_plugin_release.buildspec.model import GitSource
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges import fetch, plugin_source
from vllm_plugin_release.flows import bump


def _payload(marker: Path) -> str:
    return f"--upload-pack=touch {marker};"


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "upstream"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "README").write_text("x\n")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "one", cwd=repo, date="2026-07-14T08:00:00Z")
    git("tag", "-a", "v1.0.0", "-m", "v1", cwd=repo, date="2026-07-14T08:00:00Z")
    return repo, git("rev-parse", "HEAD", cwd=repo)


def _plugin_spec(tmp_path: Path, url: str, commit: str, tag: str | None = None) -> Path:
    spec = tmp_path / "p" / "buildspec" / "inj.toml"
    spec.parent.mkdir(parents=True)
    (tmp_path / "p" / "pyproject.toml").write_text("")
    spec.write_text(
        'spec_version = 1\nname = "inj"\n\n[core]\nname = "vllm"\nversion = "0.25.1"\n'
        'target_device = "empty"\nsource_date_epoch = 1784016000\n\n[core.source]\n'
        f'kind = "sdist"\nsha256 = "{"a" * 64}"\n\n[build]\npython = "3.11"\n'
        'backend = "local"\n\n[plugin]\nname = "vllm-toy-plugin"\n\n[plugin.source]\n'
        f'kind = "git"\nurl = "{url}"\ncommit = "{commit}"\n' + (f'tag = "{tag}"\n' if tag else "")
    )
    return spec


def _git_core_spec(tmp_path: Path, url: str, commit: str, tag: str = "v0.25.1") -> Path:
    spec = tmp_path / "p" / "buildspec" / "git.toml"
    spec.parent.mkdir(parents=True)
    (tmp_path / "p" / "pyproject.toml").write_text("")
    spec.write_text(
        'spec_version = 1\nname = "git"\n\n[core]\nname = "vllm"\nversion = "0.25.1"\n'
        'target_device = "empty"\nsource_date_epoch = 1784016000\n\n[core.source]\n'
        f'kind = "git"\nurl = "{url}"\ntag = "{tag}"\ncommit = "{commit}"\n\n'
        '[build]\npython = "3.11"\nbackend = "local"\n'
    )
    return spec


# --- plugin source ---------------------------------------------------------------------


def test_plugin_source_url_is_not_run_as_an_option(tmp_path: Path) -> None:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.buildspec.model import from_data
    from vllm_plugin_release.core.compat import tomllib

    marker = tmp_path / "MARKER"
    path = _plugin_spec(tmp_path, _payload(marker), "b" * 40, tag="v1.0.0")
    # First wall: the spec loader refuses a URL that starts with '-' ...
    with pytest.raises(BadInput, match=r"inj\.toml:\d+: url = '--upload-pack"):
        load_spec(path)
    # ... second wall: the edge refuses it too, for a spec that did not go through the loader.
    spec = from_data(tomllib.loads(path.read_text()), path)
    cache = Cache(tmp_path / ".vpr")
    # a cached checkout skips the clone: only the tag check talks to the url then
    done = cache.root / "plugins" / ("b" * 40)
    (done / "checkout").mkdir(parents=True)
    (done / ".vpr-complete").write_text("b" * 40 + "\n")
    with pytest.raises(BadInput, match=r"\[plugin.source\] url"):
        plugin_source.resolve(spec, cache)
    assert not marker.exists()


@pytest.mark.parametrize("what", ["ls-remote", "clone"])
def test_plugin_source_git_calls_refuse_an_option_url(tmp_path: Path, what: str) -> None:
    marker = tmp_path / "MARKER"
    with pytest.raises(BadInput, match="would be read as a git option"):
        if what == "ls-remote":
            plugin_source._remote_tag_commit(_payload(marker), "v1.0.0")
        else:
            plugin_source._clone_commit(_payload(marker), "b" * 40, tmp_path / "d", None)
    assert not marker.exists()


def test_plugin_source_tag_starting_with_dash_is_refused(tmp_path: Path) -> None:
    from vllm_plugin_release.buildspec.load import load_spec

    repo, head = _repo(tmp_path)
    spec = load_spec(_plugin_spec(tmp_path, str(repo), head, tag="--output=/dev/null"))
    with pytest.raises(BadInput, match=r"\[plugin.source\] tag"):
        plugin_source.resolve(spec, Cache(tmp_path / ".vpr"))


def test_plugin_source_honest_url_still_resolves(tmp_path: Path) -> None:
    repo, head = _repo(tmp_path)
    assert plugin_source._remote_tag_commit(str(repo), "v1.0.0") == head
    plugin_source._clone_commit(str(repo), head, tmp_path / "d", "v1.0.0")
    assert git("rev-parse", "HEAD", cwd=tmp_path / "d") == head


# --- core git source (bump --dry-run, the fetcher) -------------------------------------


def test_bump_dry_run_with_an_option_core_url_exits_2(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    spec = _git_core_spec(tmp_path, _payload(marker), "c" * 40)
    # the old tree is cached (a clone skipped): the tag lookup of the new version talks to url
    old = Cache(tmp_path / "p" / ".vpr").git_dir("c" * 40)
    old.mkdir(parents=True)
    (old / "README").write_text("x\n")
    done = vpr(
        "bump", "--spec", str(spec), "--core", "0.26.0", "--dry-run", cwd=spec.parent.parent,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    # refused when the spec is loaded, naming the file, line and key
    assert re.search(r"\.toml:\d+: url = '--upload-pack", done.stderr), done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists()


def test_bump_dry_run_with_an_option_tag_exits_2(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    repo, head = _repo(tmp_path)
    spec = _git_core_spec(tmp_path, str(repo), head, tag="v1.0.0")
    done = vpr(
        "bump", "--spec", str(spec), "--core", "0.26.0", "--dry-run",
        f"--tag={_payload(marker)}", cwd=spec.parent.parent, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--tag" in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists()


def test_tag_commit_refuses_and_still_reads_a_real_repo(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    repo, head = _repo(tmp_path)
    with pytest.raises(BadInput):
        bump.tag_commit(_payload(marker), "v1.0.0")
    with pytest.raises(BadInput):
        bump.tag_commit(str(repo), "-v1.0.0")
    assert not marker.exists()
    assert bump.tag_commit(str(repo), "v1.0.0") == head


@pytest.mark.parametrize("field", ["url", "tag"])
def test_fetcher_clone_refuses_an_option(tmp_path: Path, field: str) -> None:
    marker = tmp_path / "MARKER"
    repo, head = _repo(tmp_path)
    url, tag = (_payload(marker), "v1.0.0") if field == "url" else (str(repo), _payload(marker))
    with pytest.raises(BadInput, match=rf"\[core.source\] {field}"):
        fetch.Fetcher(Cache(tmp_path / ".vpr")).git(GitSource(url=url, tag=tag, commit=head))
    assert not marker.exists()
    tree = fetch.Fetcher(Cache(tmp_path / ".vpr")).git(
        GitSource(url=str(repo), tag="v1.0.0", commit=head)
    )
    assert (tree / "README").exists()


# --- hardware plan ---------------------------------------------------------------------


def test_hardware_plan_since_starting_with_dash_is_refused(tmp_path: Path) -> None:
    from vllm_plugin_release.flows import hardware

    marker = tmp_path / "MARKER"
    repo, _ = _repo(tmp_path)
    with pytest.raises(BadInput, match="--since"):
        hardware._changed([], f"--output={marker}", repo)
    assert not marker.exists()


# --- uv --------------------------------------------------------------------------------


def test_find_links_starting_with_dash_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm_plugin_release.edges import uv

    monkeypatch.setattr(uv, "pip_find_links", lambda: [])
    with pytest.raises(BadInput, match="find_links"):
        uv.find_link_args(["--index-url=http://127.0.0.1:9/"])
    assert uv.find_link_args(["/srv/wheels"]) == ["--find-links", "/srv/wheels"]


# --- twine / pip -----------------------------------------------------------------------


def test_index_url_starting_with_dash_is_refused(tmp_path: Path) -> None:
    from vllm_plugin_release.edges import publisher
    from vllm_plugin_release.edges.index import IndexTarget
    from vllm_plugin_release.edges.runner import LocalRunner

    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    wheel.write_bytes(b"x")
    with pytest.raises(BadInput, match="--index"):
        publisher.twine_upload(IndexTarget("--help", "--help"), [wheel])
    with pytest.raises(BadInput, match="--index"):
        publisher.install_with_hashes(
            tmp_path / "python", "--help", tmp_path / "req.txt", LocalRunner("off")
        )
