"""Runners: where commands execute, `local` (this machine: `LocalRunner`, and its facts for
run.json) or `docker` (`edges/container`). Both take the same `Command`s; a runner only
decides how a command starts, and `with runner:` readies and releases it."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple, Protocol

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.buildrecord import RunnerFacts
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.edges import interpreters, proc, settings, uv
from vllm_plugin_release.edges.interpreters import Interpreter
from vllm_plugin_release.edges.proc import can_unshare_network
from vllm_plugin_release.edges.uv import uv_bin

# `network=HOST_NETWORK`: the command shares this machine's network namespace (a service
# on its loopback is reachable); a container runner grants it to that one command only.
HOST_NETWORK = "host"
Network = bool | Literal["host"]


@dataclass(frozen=True)
class Command:
    """One step of a recipe: argv, environment and working folder (workspace-relative)."""

    label: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    network: bool = True  # False: the step must run with no network access
    downloads: bool = False  # a uv install: say what it downloads (`edges/uv`)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return failure_excerpt(text, lines)


# Lines that say why a tool failed, wherever they fall in its log: a disk that filled
# early is named even when the last lines are a long command line.
_CAUSES = ("no space left", "error", "e: ", "fatal", "permission denied", "cannot ")
_WIDTH = 300  # one dpkg command line can run to kilobytes: cut each line shown


def failure_excerpt(lines: list[str], tail: int = 25, causes: int = 8) -> str:
    """The first `causes` log lines that name a cause outside the tail, then the last `tail`
    lines; each indented and cut to `_WIDTH` characters."""

    def cut(line: str) -> str:
        return "    " + (line if len(line) <= _WIDTH else line[: _WIDTH - 3] + "...")

    last = lines[-tail:] if tail else []
    head = lines[: len(lines) - len(last)]
    named = [line for line in head if any(c in line.lower() for c in _CAUSES)][:causes]
    shown = [cut(line) for line in named]
    if named:
        shown.append("    ...")
    return "\n".join(shown + [cut(line) for line in last])


def free_space_note(*folders: Path) -> str:
    """'free: /tmp 287 MiB, /x 12.0 GiB' for the folders that exist (for a failure's hint)."""
    parts = []
    for folder in folders:
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            continue
        shown = f"{free / (1 << 30):.1f} GiB" if free >= 1 << 30 else f"{free >> 20} MiB"
        parts.append(f"{folder} {shown}")
    return "free: " + ", ".join(parts) if parts else ""


class Runner(Protocol):
    """Where a stage's commands run; `describe()` goes into the stage's record."""

    kind: str
    isolate: bool  # True: a command that asks for no network gets none

    @property
    def uv(self) -> str: ...  # the uv program, as a command on this runner names it

    @property
    def env_key(self) -> str | None: ...  # what an environment made here depends on

    def describe(self) -> RunnerFacts: ...

    def run(self, cmd: Command, log: Path) -> None: ...

    def call(
        self,
        argv: Sequence[str | Path],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | str | None = None,
        network: Network = True,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[str]: ...

    def interpreter(self, version: str) -> Interpreter: ...  # PythonUnavailable: none

    def mark(self, env_dir: Path) -> None: ...  # note in an env made here where it runs

    def scratch_root(self) -> Path | None: ...  # builds' scratch outside the cache, or None

    # `with runner:` readies it (a container runner's engine and image) and releases it
    def __enter__(self) -> Runner: ...

    def __exit__(self, *exc: object) -> None: ...


class LocalRunner:
    """Runs commands as subprocesses on this machine; the workspace is a host folder."""

    kind = "local"

    def __init__(self, network_isolation: str = "auto", interpreter: str | None = None) -> None:
        self.explicit = interpreter  # --interpreter PATH (else VPR_INTERPRETER, then search)
        if network_isolation == "required" and not can_unshare_network():
            raise BadInput(
                "build.network_isolation = 'required' but `unshare -n` is not permitted here",
                hint="run as root or enable user namespaces, or set network_isolation = 'auto'",
            )
        self.isolate = network_isolation != "off" and can_unshare_network()

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    @property
    def uv(self) -> str:
        return uv_bin()

    @property
    def env_key(self) -> str | None:
        return None  # this machine's environments: keyed as they always were

    def describe(self) -> RunnerFacts:
        return RunnerFacts(self.kind)

    def mark(self, env_dir: Path) -> None:
        """An environment made here runs here: nothing to note."""

    def scratch_root(self) -> Path | None:
        return settings.build_scratch_root()

    def call(
        self,
        argv: Sequence[str | Path],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | str | None = None,
        network: Network = True,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[str]:
        argv = list(argv)
        if not network and self.isolate:
            argv = ["unshare", "-n", *argv]
        where = Path(cwd) if cwd else None
        return proc.run(argv, what=f"running {argv[0]!s}", env=env, cwd=where, timeout=timeout)

    def interpreter(self, version: str) -> Interpreter:
        return interpreters.find(version, self.explicit, self.uv)

    def interpreter_ahead(self, version: str) -> interpreters.Search:
        """Start `interpreter(version)`'s search now, in a thread (`interpreters.Search`)."""
        return interpreters.Search(version, self.explicit, self.uv)

    def run(self, cmd: Command, log: Path) -> None:
        argv = list(cmd.argv)
        if not cmd.network and self.isolate:
            argv = ["unshare", "-n", *argv]
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            out.write(f"$ {' '.join(argv)}\n".encode())
            out.flush()
            start = out.tell()
            child = proc.spawn(argv, what=cmd.label, stdout=out, env=cmd.env or None, cwd=cmd.cwd)
            watch = uv.watching(cmd.label, log, start) if cmd.downloads else nullcontext()
            try:
                with progress.working(cmd.label, log), watch:  # the log path, then a heartbeat
                    returncode = child.wait()
            finally:
                proc.forget(child)
                proc.kill_group(child.pid, grace=0 if child.returncode is None else 5)
        if returncode != 0:
            raise GateFailed(
                f"{cmd.label} failed (exit {returncode}); log: {log}\n{_tail(log)}",
                hint="read the log above; nothing was written to dist/",
            )


def host_env(**extra: str) -> dict[str, str]:
    """A minimal, explicit environment: nothing from the caller leaks into a build."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
    }
    for key in ("TMPDIR", "SSL_CERT_FILE", "UV_CACHE_DIR", "XDG_CACHE_HOME"):
        if key in os.environ:
            env[key] = os.environ[key]
    env.update(extra)
    return env


class HostFacts(NamedTuple):
    """This run's host name, platform, Python version and process id (run.json only)."""

    host: str
    platform: str
    python: str
    pid: int

    def to_json(self) -> dict[str, str | int]:
        """The keys run.json has always held, in their order."""
        return self._asdict()


def host_facts() -> HostFacts:
    """Host name, platform, Python version and process id of this run."""
    return HostFacts(socket.gethostname(), platform.platform(), sys.version.split()[0], os.getpid())
