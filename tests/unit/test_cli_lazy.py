"""`vpr COMMAND` builds only the parser of the module that registers COMMAND
(`cli.COMMANDS`): the table must say what each module registers, the one-module parser
must be the same command line for that command, and the other modules stay unloaded."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from tests.support import REPO
from vllm_plugin_release import cli


def _registered(module: str) -> tuple[str, ...]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    importlib.import_module(module).register(sub)
    return tuple(sub.choices)


@pytest.mark.parametrize("module", list(cli.COMMANDS))
def test_the_table_names_what_each_module_registers(module: str) -> None:
    assert _registered(module) == cli.COMMANDS[module]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("command", [c for names in cli.COMMANDS.values() for c in names])
def test_one_command_parser_is_that_command_of_the_whole_one(command: str) -> None:
    alone = _subcommands(cli.build_parser(command))
    whole = _subcommands(cli.build_parser())
    assert command in alone and set(alone) <= set(whole)
    assert alone[command].format_help() == whole[command].format_help()


def test_scan_core_loads_no_other_command_module() -> None:
    probe = (
        "import sys\n"
        "from vllm_plugin_release import cli\n"
        "try:\n    cli.main(['scan-core', '--help'])\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('vllm_plugin_release.cli.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert "usage: vpr scan-core" in done.stdout
    loaded = done.stdout.strip().splitlines()[-1]
    assert loaded == "['vllm_plugin_release.cli.scan']"


def test_a_mistyped_command_still_gets_a_suggestion_from_the_whole_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["scan-cor", "x"])
    assert exc.value.code == 2
    assert "did you mean scan-core?" in capsys.readouterr().err
