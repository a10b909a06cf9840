"""Errors that map onto the exit codes (1 a gate failed, 2 bad input, 3 an outside failure;
the CLI prints the message, never a traceback), and credentials kept out of messages."""

from __future__ import annotations

import re
from collections.abc import Iterable

EXIT_OK = 0
EXIT_GATE = 1
EXIT_BAD_INPUT = 2
EXIT_OUTSIDE = 3


class VprError(Exception):
    """Base class: a message for a person, and an exit code."""

    exit_code = EXIT_OUTSIDE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class GateFailed(VprError):
    """A gate or check failed (exit 1): non-reproducible build, pin mismatch, ..."""

    exit_code = EXIT_GATE


class JobFailed(GateFailed):
    """A job in the pairing environment died, answered garbage or ran past its time (exit 1): the
    plugin's code runs there, so it is a finding about the pairing."""

    def __init__(self, message: str, *, log: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.log = log


# A frame of a native stack dump (a crash handler's, e.g. torch's on SIGSEGV: C, C++ or
# assembly files, unknown ones); a Python traceback's frames name .py files and are kept.
_NATIVE_FRAME = re.compile(r'^\s*File "[^"]*(?<!\.py)", line \d+, in .*$')


def output_tail(output: str, lines: int = 15) -> str:
    """The last `lines` lines of a job's output that say something, native stack frames left
    out; where faulthandler reported a fatal error, its report's head."""
    kept = [line for line in output.strip().splitlines() if not _NATIVE_FRAME.match(line)]
    fatal = next((i for i, line in enumerate(kept) if "Fatal Python error: " in line), None)
    if fatal is not None:
        start = max(0, fatal - lines // 3)
        return "\n".join(kept[start : start + lines])
    return "\n".join(kept[-lines:])


class BadInput(VprError):
    """Bad input (exit 2): spec, arguments or files."""

    exit_code = EXIT_BAD_INPUT


class OutsideFailure(VprError):
    """An outside failure (exit 3): network, container engine, package index."""

    exit_code = EXIT_OUTSIDE


class TimedOut(OutsideFailure):
    """A command ran past its time and was killed (exit 3); one running the plugin's code is a
    JobFailed instead."""

    def __init__(self, message: str, *, output: str = "") -> None:
        super().__init__(message)
        self.output = output


class PythonUnavailable(OutsideFailure):
    """The spec's build Python cannot run here (exit 3); checks needing no pairing env still run."""


class RecordProblem(ValueError):
    """Why a mapping is not the record it should be: the dotted key and what is wrong."""


def field_shown(value: object) -> str:
    """A record's value as a message shows it."""
    if value is None:
        return "missing"
    if isinstance(value, str | int | float | bool):
        return repr(value)[:80]
    return f"a {type(value).__name__}"


# Credentials kept out of messages: one URL redaction and one scrubber for the package,
# and a URL's origin (where credentials may be sent).


# The user info of a URL ("scheme://USER:PASSWORD@"), up to the last "@" of the authority.
_USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """Text for a person without credentials: secrets become ***, URLs' user info ***@."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return _USERINFO.sub("***@", text)


Origin = tuple[str, str, int | None]


def origin(url: str) -> Origin:
    """(scheme, host, port) of `url`, the default port filled in."""
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port
