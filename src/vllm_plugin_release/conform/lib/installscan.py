"""Scan a plugin's installer inputs into a `PinningReport`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from vllm_plugin_release.conform.lib.installer.dockerfile import dockerfile
from vllm_plugin_release.conform.lib.installer.fetches import Fetches
from vllm_plugin_release.conform.lib.installer.report import CoreFindings, CorePin, PinningReport
from vllm_plugin_release.conform.lib.installer.uvlock import is_uv_sync
from vllm_plugin_release.conform.lib.installs import Installs
from vllm_plugin_release.conform.lib.plugintree import Unread, read_text, too_large
from vllm_plugin_release.conform.lib.requirements import parse_install, pip_args
from vllm_plugin_release.conform.lib.shell import (
    Shell,
    ShellCommand,
    State,
    TooComplex,
    Var,
    display,
    numbered,
)

__all__ = ["CorePin", "InputFile", "PinningReport", "guess_kind", "scan"]


class Analyzer:
    """Turns commands and requirement files into a PinningReport."""

    def __init__(self, root: Path, core_name: str, build_args: dict[str, str]) -> None:
        self.root = root
        self.build_args = build_args
        self.report = PinningReport()
        self.shell = Shell(root, self.report.notes, self.report.files_read)
        self.core = CoreFindings(core_name, self.report)
        self.fetches = Fetches(self.report, self.core)
        self.installs = Installs(root, self.report, self.core, self.fetches)

    def read_file(self, rel: str, kind: str, role: str, text: str) -> None:
        path = self.root / rel
        shown = display(self.root, path)
        if kind in ("shell", "dockerfile") and shown not in self.report.files_read:
            self.report.files_read.append(shown)
        if kind in ("shell", "dockerfile"):
            self.script(kind, text, shown)
        elif kind == "pyproject":
            self.installs.pyproject(path, (), shown, None)
        else:
            self.installs.requirements_file(path, role, None, set())

    def script(self, kind: str, text: str, shown: str) -> None:
        """A shell script or Dockerfile: its commands; when it is beyond what the analysis
        follows, the commands found before it stopped (and the report says where)."""
        start = len(self.shell.emitted)
        try:
            if kind == "shell":
                commands = self.shell.run_text(numbered(text), shown, State())
            else:
                commands, fetches = dockerfile(self.shell, text, shown, self.build_args)
                self.report.unhashed_fetches.extend(fetches)
        except TooComplex as exc:
            commands = self.shell.emitted[start:]
            self.report.incomplete.append(
                f"{exc}; analysed the {len(commands)} command(s) found before {exc.where}"
            )
        self.commands(commands)

    def commands(self, commands: list[ShellCommand]) -> None:
        previous: ShellCommand | None = None
        pipeline: list[ShellCommand] = []
        for cmd in commands:
            self.fetches.order += 1
            if cmd.op == "|":
                pipeline.append(cmd)  # (not a copy per command: a pipe of 40,000 is linear)
            else:
                pipeline = [cmd]
            if cmd.op == "|" and previous is not None:
                self.fetches.piped(previous, cmd)
            self.command(cmd, pipeline)
            previous = cmd
        self.fetches.finish_downloads()

    def command(self, cmd: ShellCommand, pipeline: list[ShellCommand]) -> None:
        name = PurePosixPath(cmd.argv[0]).name
        pip = pip_args(cmd.argv)
        if pip is not None:
            self.installs.install(parse_install(cmd, pip[0], pip[1]))
        elif is_uv_sync(cmd.argv):
            self.installs.uv_sync(cmd)
        elif name in ("curl", "wget"):
            self.fetches.download(cmd, name)
        elif name == "git":
            self.fetches.git(cmd)
        self.fetches.verification(cmd, pipeline)

    def finish(self) -> PinningReport:
        self.installs.locked_ranges()
        self.fetches.finish_downloads()
        self.fetches.finish_clones()
        report = self.report
        report.core_pin = _chosen_pin(report.core_pins)
        report.target_device = _target_device(
            self.core.installs, self.shell.assignments.get("VLLM_TARGET_DEVICE") or []
        )
        return report


def _chosen_pin(pins: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pin that counts: an exact one on an install, else any exact one, else the first."""
    installs = [p for p in pins if p["via"] not in ("constraint", "override")]
    chosen = (
        next((p for p in installs if p["exact"]), None)
        or next((p for p in pins if p["exact"]), None)
        or (installs[0] if installs else (pins[0] if pins else None))
    )
    if chosen is None:
        return None
    keys = ("version", "requirement", "exact", "file", "line", "via")
    return {key: chosen[key] for key in keys}


def _target_device(
    core_installs: list[tuple[ShellCommand, dict[str, Any]]], assignments: list[Var]
) -> dict[str, Any] | None:
    """VLLM_TARGET_DEVICE for the core install (prefix, export, ENV), else its last value."""
    for cmd, _pin in core_installs:
        var = cmd.env.get("VLLM_TARGET_DEVICE")
        if var is not None:
            return {"value": var.value, "file": var.file, "line": var.line, "effective": True}
    if not assignments:
        return None
    last = assignments[-1]
    return {
        "value": last.value,
        "file": last.file,
        "line": last.line,
        "effective": False,
        "note": "not exported to the core install"
        if core_installs
        else "set, but no core install command was found",
    }


# ---------------------------------------------------------------------------
# Files named by the spec.


@dataclass(frozen=True)
class InputFile:
    path: str
    kind: str
    role: str
    key: str  # the spec key that names it


def guess_kind(path: str, head: str = "") -> str:
    name = PurePosixPath(path).name.lower()
    if name == "pyproject.toml":
        return "pyproject"
    if (
        name in ("dockerfile", "containerfile")
        or name.endswith((".dockerfile", ".containerfile"))
        or name.startswith(("dockerfile.", "containerfile."))
    ):
        return "dockerfile"
    if name.endswith((".sh", ".bash")) or head.startswith("#!"):
        return "shell"
    return "requirements"


def scan(
    root: Path,
    files: list[InputFile],
    core_name: str = "vllm",
    build_args: dict[str, str] | None = None,
) -> PinningReport:
    """Read the installer inputs under `root` (missing ones are listed, not raised);
    Dockerfiles with `build_args` replacing their ARG defaults."""
    analyzer = Analyzer(root, core_name, dict(build_args or {}))
    for item in files:
        path = root / item.path
        if not path.is_file():
            analyzer.report.missing.append({"file": item.path, "named_by": item.key})
            continue
        try:
            text, cut = read_text(root, path)
        except Unread as exc:
            missing = {"file": item.path, "named_by": item.key, "error": exc.reason}
            analyzer.report.missing.append(missing)
            continue
        if cut:
            analyzer.report.notes.append(too_large(item.path))
        kind = item.kind or guess_kind(item.path, text[:200])
        analyzer.read_file(item.path, kind, item.role, text)
    return analyzer.finish()
