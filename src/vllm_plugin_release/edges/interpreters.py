"""Finding the CPython a pairing is built for, where machines keep it: --interpreter or
VPR_INTERPRETER, else uv, pyenv, asdf/mise, /usr/bin; each candidate asked what it is,
nothing downloaded, and the one chosen recorded with its fingerprint."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from vllm_plugin_release.core.errors import BadInput, PythonUnavailable
from vllm_plugin_release.edges import settings

ENV_VARIABLE = "VPR_INTERPRETER"
PROBE = (
    "import json, os, platform, sys, sysconfig; v = sysconfig.get_config_var; "
    "lib = os.path.join(v('LIBDIR') or '', v('INSTSONAME') or '') "
    "if v('Py_ENABLE_SHARED') else ''; "
    "print(json.dumps({'implementation': platform.python_implementation(), "
    "'version': platform.python_version(), 'executable': sys.executable, "
    "'base_prefix': sys.base_prefix, 'libpython': lib if lib and os.path.isfile(lib) else ''}))"
)
PROBE_SECONDS = 20.0
PROBE_MAX_BYTES = 64 * 1024
VERSION = re.compile(r"^3\.\d{1,2}$")


@dataclass(frozen=True)
class Interpreter:
    """A CPython this machine (or an image) has: what a venv is made from."""

    path: str  # the executable as found (a venv made from it records this path)
    version: str  # "3.10.13"
    implementation: str  # "CPython"
    sha256: str  # of its code: the executable, and libpython for a shared build
    found_by: str  # explicit | uv | pyenv | asdf | mise | system | image
    prefix: str = ""  # its installation (sys.base_prefix), for an image to copy; not recorded

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    def record(self) -> dict[str, str]:
        """What the records say about it (build-core.json, env.json, the manifest)."""
        return {
            "implementation": self.implementation,
            "version": self.version,
            "path": self.path,
            "sha256": self.sha256,
            "found_by": self.found_by,
        }

    def identity(self) -> dict[str, str]:
        """What a venv made from it depends on: its code, and where it lives (a venv
        records its interpreter's path). The wheels built in it do not (tested)."""
        return {
            "implementation": self.implementation,
            "version": self.version,
            "sha256": self.sha256,
            "path": self.path,
        }


def patch_dirs(names: Iterable[str], version: str) -> list[str]:
    """The folder names that are a CPython `version` (`3.10.13`, not `3.10.13t`, `3.10-dev`
    or `pypy3.10-7.3`), newest patch first."""
    pattern = re.compile(rf"^{re.escape(version)}\.(\d+)$")
    found = [(int(m.group(1)), n) for n in names if (m := pattern.match(n))]
    return [name for _, name in sorted(found, reverse=True)]


@dataclass(frozen=True)
class Place:
    """One place searched: how it is named in messages, and what it holds."""

    name: str  # "pyenv ($PYENV_ROOT/versions/3.10.*)"
    found_by: str
    candidates: tuple[str, ...]  # executables to ask, in order


def version_root_candidates(root: Path, version: str, names: Iterable[str]) -> tuple[str, ...]:
    return tuple(str(root / n / "bin" / f"python{version}") for n in patch_dirs(names, version))


def not_found_message(version: str, searched: list[tuple[str, str]]) -> tuple[str, str]:
    """(message, hint) for no CPython `version` anywhere; `searched`: (place, what it had)."""
    lines = "\n".join(f"  - {place}: {had}" for place, had in searched)
    message = f"no CPython {version} interpreter on this machine; searched:\n{lines}"
    hint = (
        f"install one (`pyenv install {version}`, or your distribution's python{version}), or "
        f"name one with --interpreter PATH or {ENV_VARIABLE}=PATH; in GitHub Actions, "
        f"`actions/setup-python` with python-version '{version}'; or run in a container "
        "that has it ([build] backend = 'docker', `vpr build-image`)"
    )
    return message, hint


def _listdir(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _home() -> Path:
    return Path(os.environ.get("HOME") or os.path.expanduser("~"))


def places(version: str, uv: str | None) -> Iterator[Place]:
    """The places after an explicit path, in order (lazy: listed only when needed)."""
    if uv:
        yield Place(f"uv ({uv} python find --system)", "uv", ("uv",))
    pyenv = Path(os.environ.get("PYENV_ROOT") or _home() / ".pyenv") / "versions"
    yield Place(
        f"pyenv ({pyenv}/{version}.*)",
        "pyenv",
        version_root_candidates(pyenv, version, _listdir(pyenv)),
    )
    asdf = Path(os.environ.get("ASDF_DATA_DIR") or _home() / ".asdf") / "installs" / "python"
    yield Place(
        f"asdf ({asdf}/{version}.*)", "asdf", version_root_candidates(asdf, version, _listdir(asdf))
    )
    data = Path(os.environ.get("XDG_DATA_HOME") or _home() / ".local" / "share")
    mise = Path(os.environ.get("MISE_DATA_DIR") or data / "mise") / "installs" / "python"
    yield Place(
        f"mise ({mise}/{version}.*)", "mise", version_root_candidates(mise, version, _listdir(mise))
    )
    system = f"/usr/bin/python{version}"
    yield Place(system, "system", (system,) if os.path.exists(system) else ())


def probe(executable: str) -> dict[str, str] | None:
    """What `executable` says it is, or None (not there, not runnable, not an answer)."""
    try:
        popen = subprocess.Popen(
            [executable, "-I", "-S", "-c", PROBE],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"},
        )
    except OSError:
        return None
    try:
        out, _ = popen.communicate(timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.communicate()
        return None
    if popen.returncode != 0 or len(out) > PROBE_MAX_BYTES:
        return None
    try:
        answer = json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    if not isinstance(answer, dict) or not all(isinstance(v, str) for v in answer.values()):
        return None
    return answer


def _sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(os.path.realpath(path), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(executable: str, libpython: str = "") -> str:
    """sha256 of the interpreter's code: its executable file and, for a shared build (pyenv's
    and most distributions'), the libpython it loads."""
    parts = [f"executable {_sha256_file(executable)}"]
    if libpython:
        parts.append(f"libpython {_sha256_file(libpython)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _uv_find(uv: str, version: str) -> tuple[str | None, str]:
    """(path, what uv said): uv's answer, or None with its first line of complaint."""
    try:
        done = subprocess.run(
            [uv, "python", "find", "--system", "--no-python-downloads", "--", version],
            capture_output=True,
            text=True,
            timeout=PROBE_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"uv did not answer ({exc})"
    path = done.stdout.strip()
    if done.returncode == 0 and path and "\n" not in path:
        return path, ""
    said = (done.stderr.strip().splitlines() or ["none"])[0][:200]
    return None, said.removeprefix("error: ")


def _matches(answer: dict[str, str] | None, version: str) -> bool:
    return bool(
        answer
        and answer.get("implementation") == "CPython"
        and ".".join(answer.get("version", "").split(".")[:2]) == version
    )


def _interpreter(path: str, answer: dict[str, str], found_by: str) -> Interpreter:
    return Interpreter(
        path=path,
        version=answer["version"],
        implementation=answer["implementation"],
        sha256=fingerprint(path, answer.get("libpython", "")),
        found_by=found_by,
        prefix=answer.get("base_prefix", ""),
    )


# What an image that carries this interpreter leaves out of its installation: the test
# suite, Tk and IDLE, and whatever was pip-installed into it (venvs are made from it).
LEFT_OUT = re.compile(
    r"^lib/python3\.\d+/(test|idlelib|tkinter|turtledemo|lib2to3/tests|ctypes/test|"
    r"distutils/tests|unittest/test|site-packages/.+)(/|$)|"
    r"^lib/python3\.\d+/lib-dynload/(_tkinter|_test|xxlimited)[^/]*$|^share/|"
    r"^lib/python3\.\d+/config-[^/]+/libpython[^/]*\.a$"
)


def install_members(interpreter: Interpreter) -> list[str]:
    """The files, folders and links of the interpreter's installation an image needs
    (relative to its prefix, sorted): not LEFT_OUT, no other programs in bin/."""
    prefix = Path(interpreter.prefix)
    if not interpreter.prefix or not (prefix / "lib").is_dir():
        raise BadInput(f"{interpreter.path}: no installation folder to copy ({prefix})")
    exe = f"python{interpreter.minor}"
    keep_bin = {exe, "python3", "python"}
    out: list[str] = []
    for folder, dirs, files in os.walk(prefix):
        rel_dir = os.path.relpath(folder, prefix)
        for name in sorted([*files, *(d for d in dirs if os.path.islink(os.path.join(folder, d)))]):
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel.startswith("bin/") and name not in keep_bin:
                continue
            if not LEFT_OUT.search(rel):
                out.append(rel)
        dirs[:] = sorted(
            d
            for d in dirs
            if not os.path.islink(os.path.join(folder, d))
            and not LEFT_OUT.search(os.path.normpath(os.path.join(rel_dir, d)) + "/")
        )
    return sorted(out)


def named_by(explicit_path: str | None) -> tuple[str, str] | None:
    """(path, where it was named): `--interpreter PATH`, else $VPR_INTERPRETER, else None."""
    if explicit_path:
        return explicit_path, "--interpreter"
    given = settings.text(ENV_VARIABLE)
    return (given, ENV_VARIABLE) if given else None


def explicit(path: str, version: str, source: str) -> Interpreter:
    """The interpreter named by `source` (--interpreter or VPR_INTERPRETER): a CPython
    `version`, else BadInput naming both; a bare name is the program on PATH."""
    given = path
    if os.sep not in path:
        path = shutil.which(path) or path
    named = f"{source} {given}" + (f" ({path})" if path != given else "")
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise BadInput(
            f"{named}: not an executable file",
            hint=f"name a CPython {version} executable, e.g. ~/.pyenv/versions/{version}.N/bin/"
            f"python{version}",
        )
    answer = probe(path)
    if not _matches(answer, version):
        what = (
            f"{answer['implementation']} {answer['version']}"
            if answer
            else "not a Python that answers (it does not start, or says nothing)"
        )
        raise BadInput(
            f"{named}: it is {what}, not CPython {version} (the spec's [build] python)",
            hint=f"name a CPython {version} executable, or unset {source}",
        )
    try:
        return _interpreter(path, answer or {}, "explicit")
    except OSError as exc:  # its files as it named them are not there for this process
        raise BadInput(
            f"{named}: CPython {version} answers, but its "
            f"{_which_file(exc, answer or {})} cannot be read here ({exc.strerror})",
            hint="name an interpreter installed on this machine (not one a wrapper runs in "
            f"another root or container), or unset {source}",
        )


def _which_file(exc: OSError, answer: dict[str, str]) -> str:
    """The file an OSError of the fingerprint is about, as a message names it."""
    lib = answer.get("libpython", "")
    if lib and exc.filename and os.path.basename(str(exc.filename)) == os.path.basename(lib):
        return f"libpython {lib}"
    return f"file {exc.filename}" if exc.filename else "executable"


class Search:
    """`find` started now in a thread of its own (the search is mostly waiting), so it hides
    behind other work; after `wait()`, a found answer is find's (a failure is not kept)."""

    def __init__(self, version: str, explicit_path: str | None, uv: str | None) -> None:
        self._thread = threading.Thread(
            target=self._search, args=(version, explicit_path, uv), name="vpr-interpreter"
        )
        self._thread.daemon = True  # a run that stops early does not wait for it
        self._thread.start()

    @staticmethod
    def _search(version: str, explicit_path: str | None, uv: str | None) -> None:
        with contextlib.suppress(Exception):  # not kept: `find` searches again and says it
            find(version, explicit_path, uv)

    def wait(self) -> None:
        self._thread.join()


@functools.lru_cache(maxsize=16)
def find(version: str, explicit_path: str | None = None, uv: str | None = None) -> Interpreter:
    """The CPython `version` ("3.10") this machine has: PythonUnavailable naming every place
    searched when none has one; BadInput for a bad explicit path or version."""
    return _search(version, explicit_path, uv)


def _search(version: str, explicit_path: str | None, uv: str | None) -> Interpreter:
    """`find`'s search, each time it is asked."""
    if not VERSION.match(version):
        raise BadInput(f"[build] python = {version!r}: expected 3.X")
    named = named_by(explicit_path)
    if named:
        return explicit(named[0], version, named[1])
    searched = [("--interpreter / " + ENV_VARIABLE, "not set")]
    for place in places(version, uv):
        candidates, said = place.candidates, "none"
        if place.found_by == "uv" and uv:
            found, said = _uv_find(uv, version)
            candidates = (found,) if found else ()
        if not candidates:
            searched.append((place.name, said or "none"))
            continue
        unreadable = ""
        for candidate in candidates:
            answer = probe(candidate)
            if _matches(answer, version):
                try:
                    return _interpreter(candidate, answer or {}, place.found_by)
                except OSError as exc:  # passed over, and said why
                    unreadable = f"; {candidate}: {_which_file(exc, answer or {})} unreadable"
        said = f"{', '.join(candidates)} did not answer as CPython{unreadable}"
        searched.append((place.name, said))
    message, hint = not_found_message(version, searched)
    raise PythonUnavailable(message, hint=hint)
