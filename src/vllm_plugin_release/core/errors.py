"""Errors that map onto the documented exit codes.

0 success; 1 a gate or check failed; 2 bad input (spec, arguments, files);
3 an outside failure (network, engine, index). The CLI prints the message, never
a traceback, for these.
"""

from __future__ import annotations

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


class BadInput(VprError):
    """Bad input (exit 2): spec, arguments or files."""

    exit_code = EXIT_BAD_INPUT


class OutsideFailure(VprError):
    """An outside failure (exit 3): network, container engine, package index."""

    exit_code = EXIT_OUTSIDE


class PythonUnavailable(OutsideFailure):
    """The spec's build Python cannot run here (exit 3): no such interpreter on this
    machine, or no image carrying it. The stages that need it stop; the checks that need
    no pairing environment still run (`conform/envfree.py`)."""
