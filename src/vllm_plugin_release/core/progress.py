"""Progress and status output on stderr (rich, imported on the first line printed)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

_made: dict[str, Any] = {}
_making = threading.Lock()


def _console() -> Console:
    console = _made.get("console")
    if console is None:
        with _making:
            if "console" not in _made:
                from rich.console import Console

                _made["console"] = Console(stderr=True, highlight=False, soft_wrap=True)
            console = _made["console"]
    return console


def __getattr__(name: str) -> Any:
    """`progress.console`: the one rich Console on stderr, made on first use."""
    if name == "console":
        return _console()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


_mode: dict[str, Any] = {"interactive": None, "heartbeat": 15.0, "github": False}


def heartbeat_seconds() -> float:
    """Seconds between the "still running" lines of a long step (`VPR_HEARTBEAT`)."""
    return float(_mode["heartbeat"])


def configure(*, interactive: bool | None, heartbeat: float = 15.0, github: bool = False) -> None:
    """Live displays or plain lines (`heartbeat`: seconds between "still running" lines), and
    GitHub Actions groups; decided once from the terminal and $CI."""
    _mode.update(interactive=interactive, heartbeat=heartbeat, github=github)


def interactive() -> bool:
    chosen = _mode["interactive"]
    return _console().is_terminal if chosen is None else chosen


_tags = threading.local()


@contextlib.contextmanager
def tagged(name: str) -> Iterator[None]:
    """This thread's lines carry `[name]` during the block: a stage run beside others keeps its
    lines apart from theirs."""
    before = getattr(_tags, "name", None)
    _tags.name = name
    try:
        yield
    finally:
        _tags.name = before


def _tag() -> str:
    name = getattr(_tags, "name", None)
    return escape(f"[{name}] ") if name else ""


def info(message: str) -> None:
    _console().print(f"[bold]vpr[/bold] {_tag()}{escape(message)}")


def note(message: str) -> None:
    """`info` for a read command's status line, written plainly without importing rich when
    stderr is no terminal and no console was made yet."""
    isatty = getattr(sys.stderr, "isatty", None)
    if "console" in _made or (isatty is not None and isatty()):
        info(message)
        return
    sys.stderr.write(f"vpr {message}\n")
    sys.stderr.flush()


def warn(message: str) -> None:
    _console().print(f"[bold yellow]vpr warning[/bold yellow] {_tag()}{escape(message)}")


class BytesProgress:
    """Byte progress for a download: a rich bar on a terminal, a few lines elsewhere."""

    def __init__(self, description: str, total: int | None) -> None:
        self.description = description
        self.total = total
        self.done = 0
        self._progress: Any = None
        self._task: Any = None
        self._next_report = 0.25

    def __enter__(self) -> BytesProgress:
        if interactive():
            from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

            self._progress = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=_console(),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.description, total=self.total)
        else:
            size = f"{self.total / 1e6:.1f} MB" if self.total else "size unknown"
            info(f"{self.description} ({size})")
        return self

    def advance(self, n: int) -> None:
        self.done += n
        if self._progress is not None:
            self._progress.update(self._task, advance=n)
        elif self.total and self.done / self.total >= self._next_report:
            info(f"  {self.description}: {100 * self.done // self.total}%")
            self._next_report += 0.25

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


@contextlib.contextmanager
def status(message: str) -> Iterator[None]:
    """A spinner with a message on a terminal; one line otherwise."""
    if interactive():
        with _console().status(message):
            yield
    else:
        info(message)
        yield


def _elapsed(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60} min {whole % 60:02d} s" if whole >= 60 else f"{whole} s"


@contextlib.contextmanager
def working(what: str, log: Path | None = None) -> Iterator[None]:
    """A long step: one line when it starts and, in plain mode, a "still running" line every
    heartbeat (on a terminal the stage's spinner shows it: rich refuses nested live displays)."""
    where = f" (log: {log})" if log is not None else ""
    info(f"{what}: started{where}")
    if interactive():
        yield
        return
    started = time.monotonic()

    def beat() -> None:
        info(f"{what}: still running, {_elapsed(time.monotonic() - started)}{where}")
        sys.stderr.flush()

    with every(float(_mode["heartbeat"]), beat, "vpr-heartbeat"):
        yield


@contextlib.contextmanager
def every(seconds: float, tick: Callable[[], None], name: str) -> Iterator[None]:
    """`tick` every `seconds` in a thread of its own while the block runs (not at its start)."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(seconds):
            tick()

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def rule(title: str) -> None:
    """A rule line with `title` (a stage's, when it starts)."""
    _console().rule(f"[bold]{escape(title)}")


@contextlib.contextmanager
def stage(title: str, *, group: bool = True) -> Iterator[None]:
    """One stage of a flow: a rule line, or (unless not `group`) a GitHub Actions log group."""
    if not (_mode["github"] and group):
        rule(title)
        yield
        return
    workflow_command(f"::group::{title}")
    try:
        yield
    finally:
        workflow_command("::endgroup::")


def workflow_command(line: str) -> None:
    """A GitHub Actions workflow command on stdout, after what is on stderr (the log's order)."""
    sys.stderr.flush()
    print(line, flush=True)
