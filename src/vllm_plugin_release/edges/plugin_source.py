"""Where the plugin source comes from, verified: a git URL or a local checkout at the pinned
commit, or a folder of this repository exported from its committed tree."""

from __future__ import annotations

import io
import subprocess
from dataclasses import dataclass
from pathlib import Path

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import progress
from vllm_plugin_release.core.cache import (
    Cache,
    key_of,
    remove_tree,
    tree_intact,
    write_tree_manifest,
)
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.edges.fetch import ArchiveLimits, extract
from vllm_plugin_release.edges.git import git, is_local, refuse_option


@dataclass(frozen=True)
class PluginSource:
    root: Path  # the plugin's source tree (where its pyproject.toml is)
    kind: str  # git | path
    repository: str
    commit: str | None
    source_date_epoch: int
    dirty: bool = False

    def record(self) -> dict[str, str | int | None]:
        """The source as build-plugin.json's `build_env.source` holds it."""
        return {
            "kind": self.kind,
            "repository": self.repository,
            "commit": self.commit,
            "source_date_epoch": self.source_date_epoch,
        }


def _ok(done: subprocess.CompletedProcess[str], what: str) -> str:
    if done.returncode != 0:
        raise OutsideFailure(f"{what}: {done.stderr.strip() or 'git failed'}")
    return done.stdout.strip()


def commit_time(repo: Path, commit: str) -> int:
    return int(_ok(git("log", "-1", "--format=%ct", commit, cwd=repo), "git log"))


def _has_commit(repo: Path, commit: str) -> bool:
    return git("cat-file", "-e", f"{commit}^{{commit}}", cwd=repo).returncode == 0


def resolve(spec: Spec, cache: Cache, override: Path | None = None) -> PluginSource:
    """The verified plugin source tree for the spec (or the override checkout)."""
    plugin = spec.plugin
    if plugin is None:
        raise BadInput(f"{spec.path}: no [plugin] table", hint="add [plugin] name and source")
    source = plugin.source
    sub = plugin.subdirectory
    if source.kind == "path" and override is None:
        return _from_repo_path(spec, spec.resolve(str(source.path)), cache)
    commit = source.commit
    if not commit:
        raise BadInput(f"{spec.path}: [plugin.source] commit is required with --plugin-source")
    url = str(override) if override is not None else str(source.url)
    refuse_option(
        url, "--plugin-source" if override is not None else f"{spec.path}: [plugin.source] url"
    )
    if source.tag:
        refuse_option(source.tag, f"{spec.path}: [plugin.source] tag")
    if override is not None and not (override / ".git").exists() and not _is_bare(override):
        raise BadInput(
            f"{override}: not a git checkout",
            hint="--plugin-source takes a local git clone that contains the pinned commit",
        )
    dest = cache.root / "plugins" / commit
    with cache.lock(dest):  # one checkout, however many runs ask
        _discard_if_changed(dest)
        if not (dest / ".vpr-complete").exists():
            with (
                cache.publish_dir(dest) as work,
                progress.status(f"plugin: checking out {commit[:12]}"),
            ):
                _clone_commit(url, commit, work / "checkout", source.tag)
                # The marker is part of the tree the manifest records (else every later
                # check would find an unrecorded file and clone again).
                (work / ".vpr-complete").write_text(commit + "\n")
                write_tree_manifest(work)
    checkout = dest / "checkout"
    if source.tag:
        # Asked of the source every time: a cached checkout cannot see a moved tag.
        tagged = _remote_tag_commit(url, source.tag)
        if tagged != commit:
            raise GateFailed(
                f"plugin tag {source.tag!r} resolves to {tagged or 'nothing'} at {url}, "
                f"the spec pins {commit}",
                hint="a moved tag is a supply-chain event: check it, then update the pin",
            )
    return _git_source(checkout, sub, source.url if source.url is not None else url, commit)


def _git_source(checkout: Path, sub: str, repository: str, commit: str) -> PluginSource:
    """The plugin source of a checked-out pinned commit (`sub`: the plugin's folder in it)."""
    return PluginSource(
        root=checkout / sub if sub else checkout,
        kind="git",
        repository=repository,
        commit=commit,
        source_date_epoch=commit_time(checkout, commit),
    )


def present(spec: Spec, cache: Cache, override: Path | None = None) -> PluginSource | None:
    """The plugin source `resolve` would give when its tree is already cached, else None. Read-only:
    nothing is cloned or written, and a pinned tag is not asked of its remote."""
    if spec.plugin is None:
        return None
    source = spec.plugin.source
    if source.kind == "path" and override is None:
        return _present_repo_path(spec.resolve(str(source.path)), cache)
    commit = source.commit
    checkout = cache.root / "plugins" / str(commit) / "checkout"
    if not commit or not (checkout.parent / ".vpr-complete").is_file():
        return None
    sub = spec.plugin.subdirectory
    url = source.url if source.url is not None else str(override)
    return _git_source(checkout, sub, url, commit)


def _present_repo_path(folder: Path, cache: Cache) -> PluginSource | None:
    """`_from_repo_path`'s answer when its export is in the cache, else None."""
    top = git("rev-parse", "--show-toplevel", cwd=folder) if folder.is_dir() else None
    if top is None or top.returncode != 0:
        return None
    repo = Path(top.stdout.strip())
    rel = folder.resolve().relative_to(repo.resolve()).as_posix()
    commit = git("log", "-1", "--format=%H", "--", rel, cwd=repo).stdout.strip()
    tree_id = git("rev-parse", f"HEAD:{rel}", cwd=repo)
    if not commit or tree_id.returncode != 0:
        return None
    dest = _tree_dest(cache, tree_id.stdout.strip())
    return _path_source(dest / folder.name, repo, rel, commit) if dest.is_dir() else None


def _path_source(
    root: Path, repo: Path, rel: str, commit: str, dirty: bool = False
) -> PluginSource:
    """The plugin source of an in-repo plugin's exported committed tree."""
    return PluginSource(root, "path", rel, commit, commit_time(repo, commit), dirty)


def _tree_dest(cache: Cache, tree_id: str) -> Path:
    """Where the committed tree `tree_id` of an in-repo plugin is exported."""
    return cache.root / "plugins" / f"tree-{key_of(tree_id)[:16]}"


def _discard_if_changed(dest: Path) -> None:
    """A cached plugin tree that no longer matches its manifest is removed (made again)."""
    if dest.exists() and not tree_intact(dest):
        progress.warn(f"{dest}: plugin tree differs from its manifest; making it again")
        remove_tree(dest)


def _remote_tag_commit(url: str, tag: str) -> str | None:
    """The commit `tag` names at `url` now (annotated tags peeled), or None."""
    refuse_option(url, "[plugin.source] url")
    refuse_option(tag, "[plugin.source] tag")
    done = git("ls-remote", "--tags", "--", url, f"refs/tags/{tag}", f"refs/tags/{tag}^{{}}")
    if done.returncode != 0:
        raise OutsideFailure(f"{url}: cannot list tags ({done.stderr.strip()})")
    refs = dict(reversed(line.split("\t", 1)) for line in done.stdout.splitlines() if "\t" in line)
    return refs.get(f"refs/tags/{tag}^{{}}") or refs.get(f"refs/tags/{tag}")


def _is_bare(path: Path) -> bool:
    return (path / "HEAD").exists() and (path / "objects").is_dir()


def _clone_commit(url: str, commit: str, dest: Path, tag: str | None) -> None:
    refuse_option(url, "[plugin.source] url")
    done = git("clone", "--quiet", "--no-checkout", "--", url, str(dest))
    if done.returncode != 0:
        if is_local(url):
            raise BadInput(f"{url}: cannot clone ({done.stderr.strip()})")
        raise OutsideFailure(f"{url}: git clone failed: {done.stderr.strip()}")
    if tag:
        refuse_option(tag, "[plugin.source] tag")
        git("fetch", "--quiet", "origin", f"refs/tags/{tag}:refs/tags/{tag}", cwd=dest)
    if not _has_commit(dest, refuse_option(commit, "[plugin.source] commit")):
        git("fetch", "--quiet", "origin", commit, cwd=dest)  # servers that allow it
    if not _has_commit(dest, commit):
        raise BadInput(
            f"{url}: commit {commit} not found",
            hint="check [plugin.source] commit, or pass --plugin-source with a checkout "
            "that contains it",
        )
    _ok(git("checkout", "--quiet", "--detach", commit, cwd=dest), "git checkout")


def _from_repo_path(spec: Spec, folder: Path, cache: Cache) -> PluginSource:
    if not folder.is_dir():
        raise BadInput(f"{spec.path}: [plugin.source] path {folder} does not exist")
    top = git("rev-parse", "--show-toplevel", cwd=folder)
    if top.returncode != 0:
        raise BadInput(
            f"{folder}: not inside a git repository",
            hint="the in-repo plugin is built from its committed tree; commit it first",
        )
    repo = Path(top.stdout.strip())
    rel = folder.resolve().relative_to(repo.resolve()).as_posix()
    commit = git("log", "-1", "--format=%H", "--", rel, cwd=repo).stdout.strip()
    if not commit:
        raise BadInput(f"{folder}: has no commit yet", hint="commit the plugin first")
    dirty = bool(git("status", "--porcelain", "--", rel, cwd=repo).stdout.strip())
    if dirty:
        progress.warn(f"{rel}: uncommitted changes are not part of the build (committed tree used)")
    head = _ok(git("rev-parse", "HEAD", cwd=repo), "git rev-parse")
    archive = subprocess.run(
        ["git", "archive", "--format=tar", f"{head}:{rel}"], cwd=repo, capture_output=True
    )
    if archive.returncode != 0:
        raise OutsideFailure(f"git archive of {rel} failed: {archive.stderr.decode().strip()}")
    tree_id = _ok(git("rev-parse", f"{head}:{rel}", cwd=repo), "git rev-parse")
    dest = _tree_dest(cache, tree_id)
    with cache.lock(dest):  # one export, however many runs ask
        _discard_if_changed(dest)
        if not dest.exists():
            tmp = dest.with_name(dest.name + ".tmp")
            remove_tree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            # the same checks as a source archive's (nothing outside, no special file),
            # each linear in the length of a member's name, however deep the tree
            try:
                extract(
                    io.BytesIO(archive.stdout),
                    tmp / folder.name,
                    ArchiveLimits.of(spec.fetch),
                    label=f"{rel} (the committed plugin tree)",
                )
                write_tree_manifest(tmp)
            except BaseException:
                remove_tree(tmp, ignore_errors=True)  # nothing half-made is left
                raise
            tmp.rename(dest)
    return _path_source(dest / folder.name, repo, rel, commit, dirty)
