"""uv, the resolver and installer: the one module that starts uv to resolve a lock, reads
pip's find-links configuration (which uv ignores) and says what an install downloads."""

from __future__ import annotations

import configparser
import contextlib
import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.cache import atomic_write_text
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.core.lockfile import (
    LockedFile,
    LockRequest,
    exact_pins,
    hashes,
    header,
    pins,
)
from vllm_plugin_release.edges import settings


@functools.lru_cache(maxsize=1)
def uv_bin() -> str:
    """The uv executable: the one from the `uv` wheel, else PATH."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if not found:
            raise OutsideFailure("uv not found", hint="pip install uv")
        return found


def machine_cache() -> Path:
    """uv's cache on this machine (UV_CACHE_DIR, else XDG_CACHE_HOME/uv, else ~/.cache/uv): every
    environment installs its files from there, so torch is downloaded once per machine."""
    if os.environ.get("UV_CACHE_DIR"):
        return Path(os.environ["UV_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "uv"


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
    links += (settings.text("VPR_FIND_LINKS") or "").split()
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


def _uv_compile(
    request: LockRequest,
    inputs: Path,
    find_links: list[str] | tuple[str, ...],
    *,
    overrides: Path | None = None,
    caps: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    args = [uv_bin(), "pip", "compile", "--generate-hashes", "--no-header", "--quiet"]
    args += ["--python-version", request.python, "--python-platform", request.platform]
    args += ["--index-strategy", "unsafe-best-match", *find_link_args(tuple(find_links))]
    if overrides is not None:
        args += ["--override", str(overrides)]
    if caps is not None:
        args += ["--constraint", str(caps)]
    args += ["--", str(inputs)]
    return subprocess.run(args, capture_output=True, text=True, check=False)


def _unreachable(message: str) -> bool:
    return "unreachable" in message.lower() or "failed to fetch" in message.lower()


def compile_lock(
    request: LockRequest, dest: Path, find_links: list[str] | tuple[str, ...] = ()
) -> str:
    """Resolve `request` with uv and write the hash-locked file atomically; its text. An override
    that a locked package rules out is BadInput naming both (nothing written)."""
    tmp = dest.parent / f".{dest.name}.in"
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text("\n".join(request.requirements) + "\n")
    ov = dest.parent / f".{dest.name}.overrides" if request.overrides else None
    caps = dest.parent / f".{dest.name}.caps" if request.caps else None
    if ov:
        ov.write_text("\n".join(request.overrides) + "\n")
    if caps:
        caps.write_text("\n".join(request.caps) + "\n")
    try:
        with progress.working(f"lock: resolving {request.name} (uv pip compile)"):
            done = _uv_compile(request, tmp, find_links, overrides=ov, caps=caps)
    finally:
        for scratch in (tmp, ov, caps):
            if scratch:
                scratch.unlink(missing_ok=True)
    if done.returncode != 0:
        message = done.stderr.strip()
        if _unreachable(message):
            raise OutsideFailure(f"resolving {request.name}: index unreachable:\n{message}")
        raise BadInput(
            f"resolving {request.name} failed: no set of versions satisfies the requirements:"
            f"\n{message}",
            hint="relax or fix the conflicting requirement or override named above",
        )
    body = done.stdout.replace(str(tmp), f"{request.name}.in")
    body = body.replace(os.path.relpath(tmp), f"{request.name}.in")
    body = exact_pins(request, body)
    if request.overrides:
        check_overrides(request, body, dest, find_links)
    notes = file_notes(request, body, find_links)
    text = "\n".join(header(request, body, notes)) + "\n" + body
    atomic_write_text(dest, text)
    return text


def check_overrides(
    request: LockRequest, body: str, dest: Path, find_links: list[str] | tuple[str, ...]
) -> None:
    """The locked set, resolved again as exact pins without overrides, must hold together; else
    BadInput naming the override, the package and its requirement."""
    exact = dest.parent / f".{dest.name}.exact"
    # `===`: exactly the locked release (a find-links +cpu build must not stand in for it)
    exact.write_text("\n".join(f"{name}==={version}" for name, version in pins(body).items()))
    try:
        with progress.working(f"lock: checking {request.name}'s overrides against its pins"):
            done = _uv_compile(request, exact, find_links)
    finally:
        exact.unlink(missing_ok=True)
    if done.returncode == 0:
        return
    message = done.stderr.strip()
    if _unreachable(message):
        raise OutsideFailure(f"checking {request.name}'s overrides: index unreachable:\n{message}")
    locked = pins(body)
    named = [
        f"{line!r} (locked {name}=={locked[name]})"
        for line in request.overrides
        if (name := override_name(line)) in locked and name in message.lower()
    ]
    raise BadInput(
        f"{dest.name}: [env] overrides {', '.join(named) or ', '.join(request.overrides)} "
        "contradict what a locked package itself requires, so that package would be "
        f"installed broken:\n{message}",
        hint='cap the package that needs more (e.g. [env] caps = ["NAME<VERSION"] for the '
        "last release the override suits), or turn the override into a cap on its own "
        "package; then `vpr lock --spec FILE`",
    )


def override_name(line: str) -> str:
    return re.split(r"[\s<>=!~;\[]", line.strip(), maxsplit=1)[0].lower().replace("_", "-")


def create_venv(folder: Path, python: str, *, offline: bool = False) -> Path:
    """`uv venv` at `folder` for Python `python` (e.g. "3.11"); its interpreter. The folder goes
    absolute and after `--` (never read as an option)."""
    folder = Path(os.path.abspath(folder))
    args = [uv_bin(), "venv", "--quiet", "--no-python-downloads", f"--python={python}"]
    args += ["--", str(folder)]
    if offline:
        args[2:2] = ["--offline"]
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
    python: Path,
    requirements: Path,
    find_links: list[str],
    *,
    offline: bool = False,
    reinstall: list[str] | None = None,
) -> None:
    """`uv pip sync --require-hashes`: the environment holds exactly `requirements`, every file
    checked by hash; those in `reinstall` (files changed in place) are installed again."""
    # --python=PATH is one argument: never read as an option
    args = [uv_bin(), "pip", "sync", "--quiet", f"--python={os.path.abspath(python)}"]
    args += ["--require-hashes", "--index-strategy", "unsafe-best-match"]
    args += find_link_args(find_links)
    if offline:
        args.append("--offline")
    for name in reinstall or ():
        args.append(f"--reinstall-package={name}")
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


DEFAULT_INDEX = "https://pypi.org/simple"


def wheel_fits(filename: str, python: str, platform: str) -> int | None:
    """How well a wheel fits a lock's Python (its CPython tag, abi3 or py3) and platform (no newer
    glibc than `x86_64-manylinux_2_34` says): higher is better, None not at all."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        _, _, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    arch, _, glibc = platform.partition("-manylinux_")
    newest = int(glibc.split("_")[1]) if glibc.count("_") == 1 else 0
    cp = "cp" + python.replace(".", "")
    best = None
    for tag in tags:
        if tag.interpreter not in (cp, "py3") and tag.abi != "abi3":
            continue
        m = re.fullmatch(rf"manylinux_2_(\d+)_{arch}", tag.platform)
        legacy = {f"manylinux2014_{arch}": 17, f"manylinux1_{arch}": 5, f"linux_{arch}": 0}
        level = (
            int(m.group(1)) if m else legacy.get(tag.platform, -1 if tag.platform != "any" else 0)
        )
        if 0 <= level <= newest:
            best = max(best or 0, level + (100 if tag.interpreter == cp else 0))
    return best


def _local_file(
    name: str, version: str, allowed: set[str], request: LockRequest, folder: Path
) -> LockedFile | None:
    from vllm_plugin_release.core.cache import sha256_file

    stem = name.replace("-", "_")
    for path in sorted(folder.glob(f"{stem}-{version}-*.whl")):
        if wheel_fits(path.name, request.python, request.platform) is None:
            continue
        digest = sha256_file(path)
        if digest in allowed:
            return LockedFile(name, path.name, digest, path.stat().st_size, str(folder))
    return None


def _index_file(
    name: str, version: str, allowed: set[str], request: LockRequest
) -> LockedFile | None:
    from vllm_plugin_release.edges import index

    try:
        files = index.project_files(DEFAULT_INDEX, name, credentials=False) or []
    except (OutsideFailure, index.Transient) as exc:
        progress.warn(f"lock: the {name} file for Python {request.python} not recorded ({exc})")
        return None
    fitting = [
        (fit, f)
        for f in files
        if f.sha256 in allowed
        and f"-{version}-" in f.filename
        and (fit := wheel_fits(f.filename, request.python, request.platform))
    ]
    if not fitting:
        return None
    chosen = max(fitting, key=lambda pair: pair[0])[1]
    return LockedFile(name, chosen.filename, chosen.sha256 or "", chosen.size or 0, DEFAULT_INDEX)


def file_notes(
    request: LockRequest, body: str, find_links: list[str] | tuple[str, ...]
) -> tuple[str, ...]:
    """The header lines naming the file this lock installs for each of `request.files` (torch, the
    vendor runtime): name, sha256, size, where from."""
    notes = []
    locked, allowed_by = pins(body), hashes(body)
    for name in request.files:
        version, allowed = locked.get(name), allowed_by.get(name, set())
        if not version or not allowed:
            continue
        found = None
        for link in [*find_links, *pip_find_links()]:
            folder = Path(link.removeprefix("file://"))
            if folder.is_dir() and (found := _local_file(name, version, allowed, request, folder)):
                break
        found = found or _index_file(name, version, allowed, request)
        if found:
            notes.append(found.note())
    return tuple(notes)


def runtime_has_no_wheel(requirement: str, python: str, platform: str) -> str | None:
    """Why `requirement` (`ttnn==0.81.1`) has no wheel for CPython `python` on `platform`, from
    the index's list; None when one does or the index cannot say (the lock then decides)."""
    from packaging.requirements import Requirement

    from vllm_plugin_release.edges import index

    req = Requirement(requirement)
    try:
        files = index.project_files(DEFAULT_INDEX, req.name, credentials=False)
    except (OutsideFailure, index.Transient):
        return None
    if files is None:
        return f"{req.name} is not on {DEFAULT_INDEX}"
    version = next(iter(req.specifier)).version if len(req.specifier) == 1 else None
    wheels = [f.filename for f in files if f.filename.endswith(".whl")]
    mine = [w for w in wheels if version is None or f"-{version}-" in w]
    if not mine:
        return f"{requirement} has no wheel on {DEFAULT_INDEX}"
    if any(wheel_fits(w, python, platform) is not None for w in mine):
        return None
    tags = sorted({w.split("-", 2)[2].removesuffix(".whl") for w in mine})
    return (
        f"{requirement} has no wheel for CPython {python} on {platform} (its wheels: "
        f"{', '.join(tags[:6])})"
    )


START = re.compile(r"^Downloading (\S+) \((\d+(?:\.\d+)?)(KiB|MiB|GiB|B)\)\s*$", re.M)
DONE = re.compile(r"^ Downloaded (\S+)\s*$", re.M)
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
POLL_SECONDS = 1.0
READ_LIMIT = 4 << 20  # a log is ours, but bound the read anyway


@dataclass
class Downloads:
    """The downloads an install's log shows so far."""

    sizes: dict[str, int] = field(default_factory=dict)  # name -> bytes
    done: set[str] = field(default_factory=set)

    @property
    def total(self) -> int:
        return sum(self.sizes.values())

    @property
    def finished(self) -> int:
        return sum(self.sizes.get(name, 0) for name in self.done)


def parse_downloads(text: str) -> Downloads:
    """The downloads in uv's output `text` (pure)."""
    found = Downloads()
    for m in START.finditer(text):
        found.sizes[m.group(1)] = int(float(m.group(2)) * UNITS[m.group(3)])
    found.done = {m.group(1) for m in DONE.finditer(text)} & set(found.sizes)
    return found


def size_text(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def announce(what: str, seen: Downloads) -> str:
    """The line said once uv starts downloading: how much, and the largest files."""
    largest = sorted(seen.sizes.items(), key=lambda kv: -kv[1])[:4]
    names = ", ".join(f"{name} {size_text(size)}" for name, size in largest)
    more = len(seen.sizes) - len(largest)
    return (
        f"{what}: downloading {size_text(seen.total)} in {len(seen.sizes)} files into uv's "
        f"cache (once per machine): {names}" + (f" and {more} more" if more > 0 else "")
    )


def _read(log: Path, offset: int) -> str:
    try:
        with log.open("rb") as fh:
            fh.seek(offset)
            return fh.read(READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return ""


@contextlib.contextmanager
def watching(what: str, log: Path, offset: int | None = None) -> Iterator[None]:
    """Say what uv downloads while the block runs (reading `log` from `offset`): what and how large,
    progress every heartbeat, the total. A warm install says nothing."""
    if offset is None:
        offset = log.stat().st_size if log.exists() else 0
    said = {"announced": 0, "reported": 0.0}

    def report(final: bool) -> None:
        seen = parse_downloads(_read(log, offset))
        if not seen.sizes:
            return
        if len(seen.sizes) > said["announced"] and not final:
            said["announced"] = len(seen.sizes)
            progress.info(announce(what, seen))
            return
        if final:
            progress.info(
                f"{what}: downloaded {size_text(seen.finished)} in {len(seen.done)} of "
                f"{len(seen.sizes)} files"
            )
            return
        said["reported"] += POLL_SECONDS
        if said["reported"] >= progress.heartbeat_seconds():
            said["reported"] = 0.0
            progress.info(
                f"{what}: {len(seen.done)} of {len(seen.sizes)} files downloaded "
                f"({size_text(seen.finished)} of {size_text(seen.total)})"
            )

    try:
        with progress.every(POLL_SECONDS, lambda: report(final=False), "vpr-uv-downloads"):
            yield
    finally:
        report(final=True)
