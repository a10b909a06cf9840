"""`git`, run as a subprocess: the one place that calls it (no prompts, never a shell)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import urllib.parse
from pathlib import Path

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
    """`value` (a URL, ref or tag from a spec, an index or the command line) unless it starts
    with '-': git would read it as an option (`--upload-pack=CMD` runs CMD). Exit 2 naming
    `key`. Callers also put URLs after `--`; this is the defence in depth."""
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
    local = not urllib.parse.urlparse(location).scheme or location.startswith("file://")
    if local:
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
