"""`git`, run as a subprocess: the one place that calls it (no prompts, never a shell), and
a core's history for bisection: a bare copy per repository in `.vpr/core-history/<key>/`,
fetched again on each use, and checkouts by commit into `.vpr/git/<commit>/`."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import urllib.parse
from pathlib import Path

from vllm_plugin_release.core.cache import Cache, key_of
from vllm_plugin_release.core.errors import BadInput, OutsideFailure


def git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `git ARGS` in `cwd`; the caller reads the return code and the output."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ADVICE": "0"}
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise OutsideFailure("git is not installed", hint="install git")


def refuse_option(value: str, key: str) -> str:
    """`value` (a URL, ref or tag) unless it starts with '-', which git would read as an option
    (`--upload-pack=CMD` runs CMD); exit 2 naming `key`."""
    if value.startswith("-"):
        raise BadInput(
            f"{key} = {value!r} starts with '-' and would be read as a git option",
            hint=f"set {key} to a repository URL, path or ref that does not start with '-'",
        )
    return value


_SEP = "\x1f"
_TAG_FORMAT = _SEP.join(
    [
        "%(refname:strip=2)",
        "%(creatordate:iso-strict)",
        "%(objecttype)",
        "%(objectname)",
        "%(*objectname)",
    ]
)


def tag_refs(repo: Path) -> list[list[str]]:
    """[name, creator date, object type, object, peeled object] of every tag in `repo`."""
    done = git("-C", str(repo), "for-each-ref", "refs/tags", f"--format={_TAG_FORMAT}")
    if done.returncode != 0:
        message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "git failed"
        raise BadInput(
            f"{repo}: cannot list tags ({message})",
            hint="pass a git repository (a clone of the plugin or the core)",
        )
    return [line.split(_SEP) for line in done.stdout.splitlines() if line.strip()]


def tag_refs_of(location: str) -> list[list[str]]:
    """`tag_refs` of a local repository (path or file:// URL), or of a remote one cloned
    bare and treeless into a temporary folder (tags and commits only)."""
    if is_local(location):
        return tag_refs(Path(location.removeprefix("file://")))
    with tempfile.TemporaryDirectory(prefix="vpr-core-tags-") as tmp:
        bare = tmp + "/repo.git"
        done = git("clone", "--bare", "--quiet", "--filter=tree:0", "--", location, bare)
        if done.returncode != 0:
            message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
            raise OutsideFailure(
                f"{location}: cannot fetch core tags ({message})",
                hint="check the network or set [conformance.cadence] core_repo to a local clone",
            )
        return tag_refs(Path(bare))


def _last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1] if stderr.strip() else "git failed"


def is_local(url: str) -> bool:
    """A path or file:// URL, not a remote repository."""
    return not urllib.parse.urlparse(url).scheme or url.startswith("file://")


def mirror(url: str, cache: Cache) -> Path:
    """A bare copy of the repository at `url` with every branch and tag, fetched now."""
    refuse_option(url, "core repository")
    if is_local(url) and not Path(url.removeprefix("file://")).exists():
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
