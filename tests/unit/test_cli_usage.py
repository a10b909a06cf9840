"""The command line's usage errors and hints: the subcommand's usage with a "did you mean",
choices refused before anything is fetched, a description on every command, the specs
that exist when one is missing, and `vpr manifest verify` hints that say what to do."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tests.pairing import make_pairing
from tests.support import REPO, vpr
from vllm_plugin_release.cli import build_parser, close, did_you_mean, main, options


def _fails(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_mistyped_command_is_suggested(capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails(["relase"], capsys)
    assert "invalid choice: 'relase'" in err and "did you mean release?" in err


def test_mistyped_nested_command_shows_that_commands_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _fails(["manifest", "verfy"], capsys)
    assert err.startswith("usage: vpr manifest ")
    assert "did you mean verify" in err


def test_mistyped_flag_names_the_subcommand_and_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _fails(["release", "--no-publsh"], capsys)
    assert err.startswith("usage: vpr release "), err  # not the top-level usage
    assert "unrecognized arguments: --no-publsh (did you mean --no-publish?)" in err


def test_mistyped_flag_with_a_value_and_an_unknown_word(capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails(["conform", "--spce=buildspec/reference.toml", "extra"], capsys)
    assert err.startswith("usage: vpr conform ")
    assert "--spce=buildspec/reference.toml (did you mean --spec?)" in err
    assert err.rstrip().endswith("extra")  # a stray word gets no made-up suggestion


def test_a_required_flag_reported_missing_because_it_was_mistyped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _fails(["manifest", "verify", "x.json", "--kye", "k.pub"], capsys)
    assert "required: --key" in err and "--kye (did you mean --key?)" in err


def test_nothing_close_means_no_suggestion() -> None:
    assert did_you_mean("--zzzzzz", ["--spec", "--dist"]) == ""
    assert close("--no-pub", ["--no-publish", "--dist"]) == ["--no-publish"]
    assert close("--plug", ["--plugin-source", "--spec"]) == ["--plugin-source"]  # prefix


def test_runner_is_checked_before_anything_is_fetched(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    done = vpr("env", "--site", "bogus", "--cache-dir", str(cache), check=False, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert "invalid choice: 'bogus' (choose from 'cpu', 'hardware')" in done.stderr
    assert "usage: vpr env" in done.stderr
    assert not cache.exists()  # nothing downloaded, no cache folder made


def test_cli_sites_are_the_records_sites() -> None:
    from vllm_plugin_release.core.envrecord import SITES

    assert options.SITES == SITES


def _commands(parser: argparse.ArgumentParser, prefix: str = "vpr"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _commands(sub, f"{prefix} {name}")


def test_every_flag_has_help() -> None:
    bare = [
        f"{name} {action.option_strings or action.dest}"
        for name, sub in [("vpr", build_parser()), *_commands(build_parser())]
        for action in sub._actions
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
        and not action.help
    ]
    assert not bare, f"flags without help: {bare}"


def test_a_flag_without_help_is_found() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    sub.add_parser("x").add_argument("--bare")
    assert [a.dest for _, p in _commands(parser) for a in p._actions if not a.help] == ["bare"]


# Flags that several commands declare, each with a meaning of its own there (not a
# parent parser of cli/options.py), and why.
OWN_MEANING = {
    "--core": "a filter of the store (query, ledger, install) or the new version (bump)",
    "--plugin": "a filter: a name (query, install), also a commit prefix (ledger)",
    "--out": "what is written differs per command: a file, a folder, a key",
    "--python": "the pairing env's (replay, api-contract) or the environment checked (check-env)",
    "--repo": "the range to bisect, the nightly's commit, or matrix's extra main column",
    "--github-output": "each command appends its own keys",
}
# Commands whose flag of a parent's name means something else there, and why.
OWN_FLAG = {
    ("vpr scan-core", "--spec"): "one of two sources of the symbols: no default",
    ("vpr hardware plan", "--spec"): "several specs, default buildspec/*",
    ("vpr manifest verify", "--key"): "required: a manifest from elsewhere names its key",
    ("vpr matrix run", "--store"): "no store unless named",
    ("vpr matrix assemble", "--store"): "no store unless named",
    ("vpr release", "--index"): "an upload URL",
    ("vpr publish", "--index"): "an upload URL",
    ("vpr manifest site", "--index"): "no spec: the public index",
    ("vpr nightly", "--force"): "runs against the schedule; nothing cached is ignored",
    ("vpr keygen", "--force"): "replaces a key; nothing cached is ignored",
}


def _differing(parser: argparse.ArgumentParser) -> list[str]:
    """The flags declared by 3 or more commands with more than one help or default, other
    than OWN_MEANING's; and every command whose flag differs from its parent's."""
    shared = {
        flag: action
        for parent in vars(options).values()
        if isinstance(parent, argparse.ArgumentParser)
        for action in parent._actions
        for flag in action.option_strings
    }
    seen: dict[str, list[tuple[str, argparse.Action]]] = {}
    for name, sub in _commands(parser):
        for action in sub._actions:
            for flag in action.option_strings:
                seen.setdefault(flag, []).append((name, action))
    found = []
    for flag, uses in seen.items():
        if flag in shared:
            want = (shared[flag].help, shared[flag].default)
            found += [
                f"{name} {flag}"
                for name, action in uses
                if (action.help, action.default) != want and (name, flag) not in OWN_FLAG
            ]
        elif (
            len(uses) >= 3
            and flag not in OWN_MEANING
            and len({(a.help, repr(a.default)) for _, a in uses}) > 1
        ):
            found.append(flag)
    return found


def test_a_shared_flag_has_one_help_and_one_default() -> None:
    assert _differing(build_parser()) == []


def test_a_shared_flag_declared_again_differently_is_found() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    sub.add_parser("a", parents=[options.DIST])
    sub.add_parser("b").add_argument("--dist", default="out", help="output root")
    for name in ("c", "d", "e"):
        sub.add_parser(name).add_argument("--tag", help=f"tag of {name}")
    assert _differing(parser) == ["vpr b --dist", "--tag"]


def test_release_help_names_every_stage_of_its_graph() -> None:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.edges import settings
    from vllm_plugin_release.flows.release import Options, Outcome, graph

    done = vpr("release", "--help", cwd=REPO)
    listed = done.stdout.split("stages, in the order the line runs them:\n")[1]
    spec = load_spec(REPO / "buildspec" / "reference.toml")
    opts = Options(cache=settings.cache_from_args(None), dist_root=Path("dist"))
    names = [stage.name for stage in graph(spec, opts, Outcome()).stages]
    assert [line.split()[0] for line in listed.splitlines() if line.strip()] == names
    assert "  publish       not with --no-publish" in listed


def test_a_stage_added_to_the_graph_is_in_release_help(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm_plugin_release.cli import _Parser
    from vllm_plugin_release.flows import stagewalk

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(_Parser, "argv", ["release", "--help"])
    toy = stagewalk.Extra("toy-stage", lambda ctx: None, ("conform",), ("release",))
    release = dict(_commands(build_parser("release")))["vpr release"]
    assert "toy-stage" not in release.format_help()
    with stagewalk.added(toy):
        assert "  toy-stage" in release.format_help()


def test_every_command_has_a_description() -> None:
    missing = [name for name, sub in _commands(build_parser()) if not sub.description]
    assert not missing, f"commands without a description: {missing}"


def test_runner_help_shows_its_choices() -> None:
    parser = dict(_commands(build_parser()))["vpr release"]
    assert "{cpu,hardware}" in parser.format_help()


def test_missing_spec_lists_the_specs_that_exist(tmp_path: Path) -> None:
    done = vpr("build-core", "--spec", "buildspec/referense.toml", check=False, cwd=REPO)
    assert done.returncode == 2
    assert "spec file not found" in done.stderr
    assert "did you mean buildspec/reference.toml?" in done.stderr
    assert "buildspec/tt.toml" in done.stderr
    assert "Traceback" not in done.stderr


def test_verify_before_any_release_says_to_run_one(tmp_path: Path) -> None:
    (tmp_path / "k.pub").write_text("unused")
    done = vpr("manifest", "verify", "dist/reference", "--key", "k.pub", check=False, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "run a release first" in done.stderr and "vpr release --spec" in done.stderr


def test_verify_of_a_store_entry_without_manifest_only_does_not_say_rebuild(
    tmp_path: Path,
) -> None:
    from vllm_plugin_release.edges import keys
    from vllm_plugin_release.edges.store import DirStore
    from vllm_plugin_release.stages import manifest as mf

    key, pub = keys.generate_keypair(tmp_path / "keys" / "k.key")
    dist = tmp_path / "dist" / "ref"
    pins = make_pairing(dist)
    mf.write_signed(dist, mf.build_manifest(pins, mf.read_records(dist)), pins, key)
    added = DirStore(tmp_path / "store").add(dist / "manifest.json", dist / "manifest.intoto.jsonl")
    copy = tmp_path / "store" / added.entry.manifest
    done = vpr("manifest", "verify", str(copy), "--key", str(pub), check=False, cwd=tmp_path)
    assert done.returncode == 1
    assert "--manifest-only" in done.stderr and "rebuild" not in done.stderr
    # a changed wheel in a release folder still says the pairing changed after signing
    wheel = next(dist.glob("*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"x")
    done = vpr("manifest", "verify", str(dist), "--key", str(pub), check=False, cwd=tmp_path)
    assert done.returncode == 1 and "rebuild" in done.stderr


def test_every_nox_session_has_a_docstring() -> None:
    """`nox --list` describes every session (its docstring's first line)."""
    import ast

    tree = ast.parse((REPO / "noxfile.py").read_text())
    sessions = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any("nox.session" in ast.unparse(d) for d in node.decorator_list)
    ]
    assert len(sessions) >= 10
    bare = [node.name for node in sessions if not ast.get_docstring(node)]
    assert not bare, f"nox sessions without a docstring: {bare}"


def test_a_command_group_alone_shows_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifest"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: vpr manifest ") and "check-env" in err
    assert "build-core" not in err  # not the top-level list


def test_site_and_backend_are_the_names_and_the_old_ones_are_refused(tmp_path: Path) -> None:
    """--site/--backend (docs/architecture.md's words); --runner/--runner-backend are
    unknown options now (exit 2)."""
    graph = ["release", "--graph", "--cache-dir", str(tmp_path / "c")]
    new = vpr(*graph, "--site", "hardware", "--backend", "local", check=False, cwd=REPO)
    assert new.returncode == 0, new.stderr
    for old in (["--runner", "hardware"], ["--runner-backend", "local"]):
        done = vpr(*graph, *old, check=False, cwd=REPO)
        assert done.returncode == 2, done.stderr
        assert f"unrecognized arguments: {old[0]}" in done.stderr
    bad = vpr(*graph, "--backend", "podman", check=False, cwd=REPO)
    assert bad.returncode == 2 and "invalid choice: 'podman'" in bad.stderr


def test_the_names_set_the_values_the_stages_read() -> None:
    from vllm_plugin_release.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["env", "--site", "hardware"]).runner == "hardware"
    assert parser.parse_args(["build-core", "--backend", "docker"]).runner_backend == "docker"


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["spec", "check", "missing.toml", "--debug"], {}),
        (["--debug", "spec", "check", "missing.toml"], {}),
        (["spec", "check", "missing.toml"], {"VPR_DEBUG": "1"}),
    ],
)
def test_debug_prints_the_traceback_behind_the_one_line_error(
    tmp_path: Path, argv: list[str], env: dict[str, str]
) -> None:
    done = vpr(*argv, cwd=tmp_path, env={"VPR_DEBUG": "", **env}, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback (most recent call last)" in done.stderr
    assert "BadInput" in done.stderr and "load.py" in done.stderr  # where it was raised
    assert "missing.toml: spec file not found" in done.stdout + done.stderr  # the line too


def test_without_debug_the_error_is_one_message(tmp_path: Path) -> None:
    done = vpr("spec", "check", "missing.toml", cwd=tmp_path, env={"VPR_DEBUG": ""}, check=False)
    assert done.returncode == 2
    assert "Traceback" not in done.stdout + done.stderr
    assert "missing.toml: spec file not found" in done.stdout + done.stderr
