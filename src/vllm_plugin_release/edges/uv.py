"""uv, the resolver and installer, and pip's find-links configuration (which uv ignores).

The only module that starts uv to resolve a lock, and the only reader of pip's
configuration files and of `PIP_FIND_LINKS` / `VPR_FIND_LINKS`.
"""

from __future__ import annotations

import configparser
import functools
import os
import subprocess
from pathlib import Path

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.cache import atomic_write_text
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.core.lockfile import LockRequest, header


@functools.lru_cache(maxsize=1)
def uv_bin() -> str:
    """The uv executable: the one from the `uv` wheel, else PATH."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        import shutil

        found = shutil.which("uv")
        if not found:
            raise OutsideFailure("uv not found", hint="pip install uv")
        return found


def pip_find_links() -> list[str]:
    """find-links from pip's configuration (uv does not read it): PIP_FIND_LINKS and files."""
    links: list[str] = []
    links += os.environ.get("PIP_FIND_LINKS", "").split()
    files = [
        Path("/etc/pip.conf"),
        Path("/etc/xdg/pip/pip.conf"),
        Path.home() / ".pip" / "pip.conf",
        Path.home() / ".config" / "pip" / "pip.conf",
    ]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    for file in files:
        parser = configparser.ConfigParser()
        try:
            parser.read(file)
        except (configparser.Error, OSError):
            continue
        for section in ("global", "install"):
            if parser.has_option(section, "find-links"):
                links += parser.get(section, "find-links").split()
    links += os.environ.get("VPR_FIND_LINKS", "").split()
    return list(dict.fromkeys(links))


def find_link_args(extra: tuple[str, ...] | list[str] = ()) -> list[str]:
    args: list[str] = []
    for link in [*extra, *pip_find_links()]:
        if link.startswith("-"):  # uv would read it as an option, not as the value
            raise BadInput(
                f"find_links = {link!r} starts with '-' and would be read as an option",
                hint="set [build] find_links (or PIP_FIND_LINKS / VPR_FIND_LINKS) to a URL "
                "or folder that does not start with '-'",
            )
        args += ["--find-links", link]
    return args


def compile_lock(
    request: LockRequest, dest: Path, find_links: list[str] | tuple[str, ...] = ()
) -> str:
    """Resolve `request` with uv and write the hash-locked file atomically. Returns its text."""
    tmp = dest.parent / f".{dest.name}.in"
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text("\n".join(request.requirements) + "\n")
    args = [
        uv_bin(),
        "pip",
        "compile",
        str(tmp),
        "--generate-hashes",
        "--no-header",
        "--quiet",
        "--python-version",
        request.python,
        "--python-platform",
        request.platform,
        "--index-strategy",
        "unsafe-best-match",
        *find_link_args(tuple(find_links)),
    ]
    ov = None
    if request.overrides:
        ov = dest.parent / f".{dest.name}.overrides"
        ov.write_text("\n".join(request.overrides) + "\n")
        args += ["--override", str(ov)]
    try:
        with progress.working(f"lock: resolving {request.name} (uv pip compile)"):
            done = subprocess.run(args, capture_output=True, text=True, check=False)
    finally:
        tmp.unlink(missing_ok=True)
        if ov:
            ov.unlink(missing_ok=True)
    if done.returncode != 0:
        message = done.stderr.strip()
        if "unreachable" in message.lower() or "failed to fetch" in message.lower():
            raise OutsideFailure(f"resolving {request.name}: index unreachable:\n{message}")
        raise BadInput(
            f"resolving {request.name} failed: no set of versions satisfies the requirements:"
            f"\n{message}",
            hint="relax or fix the conflicting requirement or override named above",
        )
    body = done.stdout.replace(str(tmp), f"{request.name}.in")
    body = body.replace(os.path.relpath(tmp), f"{request.name}.in")
    text = "\n".join(header(request, body)) + "\n" + body
    atomic_write_text(dest, text)
    return text


def create_venv(folder: Path, python: str, *, offline: bool = False) -> Path:
    """`uv venv` at `folder` for Python `python` (e.g. "3.11"); its interpreter. The folder
    goes to uv absolute and after `--` (a name like `--seed` or `-seed` is a folder, never
    an option)."""
    folder = Path(os.path.abspath(folder))
    args = [uv_bin(), "venv", "--quiet", "--python", python, "--", str(folder)]
    if offline:
        args[2:2] = ["--offline", "--no-python-downloads"]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BadInput(
            f"--python-env {folder}: could not create a Python {python} environment:\n"
            + done.stderr.strip()[-1500:],
            hint=f"install Python {python} (the pairing was certified on it) or pass the folder "
            "of an existing environment",
        )
    return folder / "bin" / "python"


def sync_locked(
    python: Path, requirements: Path, find_links: list[str], *, offline: bool = False
) -> None:
    """`uv pip sync --require-hashes`: the environment holds exactly `requirements` (missing
    and different pins installed, extra distributions removed), every file checked by hash."""
    args = [
        uv_bin(),
        "pip",
        "sync",
        "--quiet",
        f"--python={os.path.abspath(python)}",  # one argument: never read as an option
        "--require-hashes",
        "--index-strategy",
        "unsafe-best-match",
        *find_link_args(find_links),
    ]
    if offline:
        args.append("--offline")
    args += ["--", str(requirements)]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        message = done.stderr.strip()[-2500:]
        if "hash mismatch" in message.lower() or "hashes do not match" in message.lower():
            raise GateFailed(
                f"installing {requirements}: a file does not have the certified sha256:\n"
                + message,
                hint="the index or the store serves another file than the one certified; "
                "nothing else was changed",
            )
        hint = "check the network and the index, then run it again"
        if offline:
            hint = "without --offline the missing files are downloaded (by hash) once"
        raise OutsideFailure(f"installing {requirements} with hashes failed:\n{message}", hint=hint)
