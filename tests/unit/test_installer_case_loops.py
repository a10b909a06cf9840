"""The installer analysis follows `case ... esac` (the clause a static word selects, a
build argument included; every clause when the word is not static) and `for` / `while`
loops (a `for` over static words runs its body once per word; any other loop may run its
body or not). The synthetic plugin is tests/plugins/case_installer."""

from __future__ import annotations

from pathlib import Path

from tests.support import installer_spec, shell_commands
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform.checks import pinning

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "case_installer"


def _spec(tmp_path: Path, pinning_table: str = "") -> tuple[Path, Path]:
    return installer_spec(tmp_path, PLUGIN, "case-installer-plugin", pinning_table)


def test_the_default_build_arg_selects_the_index_clause(tmp_path: Path) -> None:
    spec_file, root = _spec(tmp_path)
    result = pinning.check(load_spec(spec_file), root)
    assert result.details["core_pin"]["version"] == "0.26.0", result.summary
    assert result.details["core_pin"]["line"] == 12
    assert result.details["target_device"]["effective"] is True
    assert "0.27.0" not in result.summary and "v0.27.0" not in str(result.details)


def test_a_build_arg_selects_the_git_clause(tmp_path: Path) -> None:
    table = '\n[conformance.pinning]\nbuild_args = { CORE_SOURCE = "git" }\n'
    spec_file, root = _spec(tmp_path, table)
    result = pinning.check(load_spec(spec_file), root)
    assert result.status == "fail"
    assert result.details["core_pin"]["version"] == "0.27.0", result.summary
    assert result.details["core_pin"]["via"] == "git"


def test_a_word_no_clause_matches_runs_the_default_clause_only() -> None:
    script = (
        "MODE=other\n"
        'case "$MODE" in\n'
        "  a|b) echo ab ;;\n"
        "  (c) echo c ;;\n"
        '  o*) echo "o-glob"; echo more ;;\n'
        "  *) echo default ;;\n"
        "esac\n"
        "echo after\n"
    )
    echoed = [c.argv[1] for c in shell_commands(script) if c.argv[0] == "echo"]
    assert echoed == ["o-glob", "more", "after"]
    script = script.replace("MODE=other", "MODE=b")
    assert [c.argv[1] for c in shell_commands(script) if c.argv[0] == "echo"] == ["ab", "after"]
    one_line = "case x in y) echo y ;; x) echo x ;; esac; echo after\n"
    assert [c.argv[1] for c in shell_commands(one_line)] == ["x", "after"]


def test_a_word_not_known_here_follows_every_clause_and_forgets_their_values() -> None:
    script = (
        'case "$(uname -m)" in\n'
        "  x86_64) TAG=v1; SAME=s ;;\n"
        "  aarch64) TAG=v2; SAME=s ;;\n"
        "esac\n"
        "git clone -b $TAG https://example.invalid/x.git\n"
        "echo $SAME\n"
    )
    argvs = [c.argv for c in shell_commands(script)]
    assert ["git", "clone", "-b", "$TAG", "https://example.invalid/x.git"] in argvs
    # no `*)` clause: the word may match none, so SAME is not known either
    assert ["echo", "$SAME"] in argvs


def test_for_over_static_words_runs_the_body_per_word(tmp_path: Path) -> None:
    script = 'for p in "vllm==0.26.0" torch; do\n  pip install "$p"\ndone\necho "$p"\n'
    argvs = [c.argv for c in shell_commands(script)]
    assert argvs[:2] == [["pip", "install", "vllm==0.26.0"], ["pip", "install", "torch"]]
    assert argvs[2] == ["echo", "torch"]  # the variable keeps the last word
    spec_file, root = _spec(tmp_path)
    result = pinning.check(load_spec(spec_file), root)
    unpinned = [u.get("name") for u in result.details.get("unpinned", [])]
    assert "pytest" not in unpinned and "pytest-asyncio" not in unpinned


def test_while_and_dynamic_for_may_run_or_not() -> None:
    script = (
        "V=before\n"
        'while read -r line; do V=inside; pip install "$line"; done < reqs.txt\n'
        "echo $V\n"
        "for f in $(ls wheels); do U=set; done\n"
        "echo $U\n"
    )
    argvs = [c.argv for c in shell_commands(script)]
    assert ["pip", "install", "$line"] in argvs
    assert ["echo", "$V"] in argvs and ["echo", "$U"] in argvs
    assert ["read", "-r", "line"] in argvs  # the loop's condition runs
