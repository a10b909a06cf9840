"""The installer analysis follows `if/elif/else/fi` and build arguments, and strips extras
from a local install target. The synthetic plugin is
tests/plugins/branching_installer (a Dockerfile in the shape vendor images take)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import installer_spec, shell_commands
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform.checks import pinning

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "branching_installer"


def _spec(tmp_path: Path, core: str = "0.26.0", pinning_table: str = "") -> tuple[Path, Path]:
    return installer_spec(tmp_path, PLUGIN, "branching-installer-plugin", pinning_table, core)


def test_the_untaken_then_branch_does_not_move_the_core_tag(tmp_path: Path) -> None:
    spec_file, root = _spec(tmp_path)
    result = pinning.check(load_spec(spec_file), root)
    assert result.details["core_pin"]["version"] == "0.26.0", result.summary
    assert result.details["core_pin"]["via"] == "git"
    assert result.details["from_source"]["how"] == "git checkout v0.26.0"
    assert result.details["target_device"]["effective"] is True
    assert "0.27.0" not in result.summary


def test_a_build_arg_selects_the_other_branch(tmp_path: Path) -> None:
    table = '\n[conformance.pinning]\nbuild_args = { CORE_CHANNEL = "nightly" }\n'
    spec_file, root = _spec(tmp_path, pinning_table=table)
    result = pinning.check(load_spec(spec_file), root)
    assert result.status == "fail"
    assert result.details["core_pin"]["version"] == "0.27.0"


def test_a_build_arg_that_is_a_commit_takes_the_fetch_branch(tmp_path: Path) -> None:
    table = '\n[conformance.pinning]\nbuild_args = { CORE_COMMIT = "' + "b" * 40 + '" }\n'
    spec_file, root = _spec(tmp_path, pinning_table=table)
    result = pinning.check(load_spec(spec_file), root)
    refs = [f.get("ref") for f in result.details["unhashed_fetches"]]
    assert "v0.26.0" not in refs  # the clone of the else branch is not followed


def test_unknown_condition_follows_both_branches_and_forgets_disagreeing_values() -> None:
    script = (
        "if [ -f /etc/os-release ]; then TAG=v1; A=same; else TAG=v2; A=same; fi\n"
        "git clone -b $TAG https://example.invalid/x.git\n"
        "echo $A\n"
    )
    argvs = [c.argv for c in shell_commands(script)]
    assert ["git", "clone", "-b", "$TAG", "https://example.invalid/x.git"] in argvs
    assert ["echo", "same"] in argvs


@pytest.mark.parametrize(
    ("condition", "taken"),
    [
        ('[ -n "$EMPTY" ]', "else"),
        ('[ -z "$EMPTY" ]', "then"),
        ('[ "$NAME" = "x" ]', "then"),
        ('[ "$NAME" != "x" ]', "else"),
        ('! [ "$NAME" == "x" ]', "else"),
        ('test -n "$NAME"', "then"),
        ("true", "then"),
        ("false", "else"),
    ],
)
def test_static_conditions(condition: str, taken: str) -> None:
    script = f'EMPTY=""\nNAME=x\nif {condition}; then echo then; else echo else; fi\n'
    echoed = [c.argv[1] for c in shell_commands(script) if c.argv[0] == "echo"]
    assert echoed == [taken]


def test_elif_and_nested_if() -> None:
    script = (
        "MODE=b\n"
        'if [ "$MODE" = a ]; then echo a\n'
        'elif [ "$MODE" = b ]; then\n'
        '  if [ -n "$MODE" ]; then echo b-inner; fi\n'
        "  echo b\n"
        "else echo c; fi && echo after\n"
    )
    echoed = [c.argv[1] for c in shell_commands(script) if c.argv[0] == "echo"]
    assert echoed == ["b-inner", "b", "after"]


def test_extras_on_a_checkout_path_still_name_the_checkout(tmp_path: Path) -> None:
    spec_file, root = _spec(tmp_path)
    text = (root / "docker/Dockerfile").read_text()
    assert "/src/vllm/[audio]" in text
    result = pinning.check(load_spec(spec_file), root)
    assert result.details["from_source"]["value"] is True
    assert result.details["target_device"]["line"] == 21
