"""A core's git history, for bisection: one bare copy per repository, checkouts by commit.

The copy lives in `.vpr/core-history/<key of the URL>/` (fetched again on each use, so a
new commit on the remote is seen); a checkout of one commit is made once into
`.vpr/git/<commit>/` (as a verified git source is) and reused. Every ref given on the
command line is refused when it starts with '-', and URLs go after `--`.
"""

from __future__ import annotations

import shutil
import urllib.parse
from pathlib import Path

from vllm_plugin_release.core.cache import Cache, key_of
from vllm_plugin_release.core.errors import BadInput, OutsideFailure
from vllm_plugin_release.edges.git import git, refuse_option


def _last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1] if stderr.strip() else "git failed"


def _local(url: str) -> bool:
    return not urllib.parse.urlparse(url).scheme or url.startswith("file://")


def mirror(url: str, cache: Cache) -> Path:
    """A bare copy of the repository at `url` with every branch and tag, fetched now."""
    refuse_option(url, "core repository")
    if _local(url) and not Path(url.removeprefix("file://")).exists():
        raise BadInput(f"{url}: no such repository", hint="pass a core git repository (--repo)")
    final = cache.root / "core-history" / key_of({"url": url})[:24]
    with cache.lock(final):
        if not final.exists():
            with cache.publish_dir(final) as work:
                done = git("clone", "--bare", "--quiet", "--", url, str(work / "repo.git"))
                if done.returncode != 0:
                    raise OutsideFailure(f"{url}: git clone failed: {_last_line(done.stderr)}")
        repo = final / "repo.git"
        done = git("fetch", "--quiet", "--tags", "--prune", "--", url, "+refs/*:refs/*", cwd=repo)
        if done.returncode != 0:
            raise OutsideFailure(f"{url}: git fetch failed: {_last_line(done.stderr)}")
    return repo


def resolve(repo: Path, ref: str, what: str, url: str) -> str:
    """The full commit `ref` (a commit, tag or branch) names in `repo`; exit 2 when none."""
    refuse_option(ref, what)
    done = git(
        "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", cwd=repo
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise BadInput(
            f"{what} {ref!r}: no such commit in {url}",
            hint="give a commit, tag or branch of the core repository that is reachable there",
        )
    return done.stdout.strip()


def commits_between(repo: Path, good: str, bad: str, url: str) -> list[str]:
    """Commits from `good` to `bad` (both included, oldest first) along the first-parent
    line of `bad` that descends from `good`; exit 2 when `good` is not an ancestor."""
    if git("merge-base", "--is-ancestor", good, bad, cwd=repo).returncode != 0:
        raise BadInput(
            f"{url}: --good {good[:12]} is not an ancestor of --bad {bad[:12]}",
            hint="the good end must come before the bad end in the core's history",
        )
    done = git(
        "rev-list", "--reverse", "--first-parent", "--ancestry-path", f"{good}..{bad}", cwd=repo
    )
    if done.returncode != 0:
        raise OutsideFailure(f"{url}: git rev-list failed: {_last_line(done.stderr)}")
    return [good, *done.stdout.split()]


def subject(repo: Path, commit: str) -> str:
    """The first line of the commit's message."""
    done = git("log", "-1", "--format=%s", commit, cwd=repo)
    return done.stdout.strip() if done.returncode == 0 else ""


def commit_time(repo: Path, commit: str) -> int:
    """The committer time of `commit` (seconds since the epoch): its SOURCE_DATE_EPOCH."""
    done = git("log", "-1", "--format=%ct", commit, cwd=repo)
    if done.returncode != 0:
        raise OutsideFailure(f"{repo}: git log failed: {_last_line(done.stderr)}")
    return int(done.stdout.strip())


def checkout(repo: Path, commit: str, cache: Cache) -> Path:
    """A working tree of `commit` (with its .git, for version tools), made once and reused."""
    final = cache.git_dir(commit)
    with cache.lock(final):
        if final.exists():
            return final
        with cache.publish_dir(final) as work:
            tree = work / "checkout"
            done = git("clone", "--quiet", "--no-checkout", "--", str(repo), str(tree))
            if done.returncode != 0:
                raise OutsideFailure(f"{repo}: git clone failed: {_last_line(done.stderr)}")
            done = git("checkout", "--quiet", "--detach", commit, cwd=tree)
            if done.returncode != 0:
                raise OutsideFailure(f"{commit}: git checkout failed: {_last_line(done.stderr)}")
            for entry in tree.iterdir():
                shutil.move(str(entry), work / entry.name)
            tree.rmdir()
    return final
