"""Finding the CPython a pairing is built for (`edges/interpreters.py`), against real
interpreters: this one, copies of it laid out as pyenv, asdf and mise keep them, a failing
shim, and a place that has none."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import other_cpython
from vllm_plugin_release.core.errors import BadInput, PythonUnavailable
from vllm_plugin_release.edges import interpreters
from vllm_plugin_release.edges.interpreters import find, patch_dirs

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"
REAL = os.path.realpath(sys.executable)
OTHER = other_cpython(HERE)
find.cache_clear()


@pytest.fixture(autouse=True)
def empty_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine with no interpreter anywhere: every place points into an empty folder."""
    home = tmp_path / "home"
    home.mkdir()
    for var in ("PYENV_ROOT", "ASDF_DATA_DIR", "MISE_DATA_DIR", "XDG_DATA_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv(interpreters.ENV_VARIABLE, raising=False)
    monkeypatch.setenv("HOME", str(home))
    find.cache_clear()
    yield home
    find.cache_clear()


def _install(root: Path, version_dir: str) -> Path:
    """A real interpreter at `root/version_dir/bin/pythonX.Y` (a link to this one)."""
    python = root / version_dir / "bin" / f"python{HERE}"
    python.parent.mkdir(parents=True)
    python.symlink_to(REAL)
    return python


def test_newest_patch_of_the_asked_version_only() -> None:
    names = ["3.10.2", "3.10.13", "3.10.9", "3.10.13t", "3.10-dev", "pypy3.10-7.3.12", "3.11.7"]
    assert patch_dirs(names, "3.10") == ["3.10.13", "3.10.9", "3.10.2"]
    assert patch_dirs(names, "3.1") == []  # 3.10.x is not 3.1.x


def test_nothing_anywhere_names_every_place_searched(empty_machine: Path) -> None:
    with pytest.raises(PythonUnavailable) as err:
        find("3.99", None, None)
    assert err.value.exit_code == 3
    text = err.value.message
    for place in ("VPR_INTERPRETER", "pyenv", "asdf", "mise", "/usr/bin/python3.99"):
        assert place in text
    assert str(empty_machine / ".pyenv" / "versions") in text
    hint = err.value.hint or ""
    assert "pyenv install 3.99" in hint and "actions/setup-python" in hint
    assert "uv python install" not in hint  # downloads from GitHub: no use here


def test_pyenv_versions_are_found_where_the_shim_fails(
    empty_machine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pyenv's shims fail for every version but the global one: never asked
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / f"python{HERE}").write_text(
        "#!/bin/sh\necho 'pyenv: command not found' >&2\nexit 127\n"
    )
    (shims / f"python{HERE}").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}:{os.environ['PATH']}")
    root = tmp_path / "pyenv"
    older = _install(root / "versions", f"{HERE}.0")
    newer = _install(root / "versions", f"{HERE}.99")
    monkeypatch.setenv("PYENV_ROOT", str(root))
    found = find(HERE, None, None)
    assert found.path == str(newer) and found.found_by == "pyenv"
    assert found.version == ".".join(map(str, sys.version_info[:3]))
    assert found.implementation == "CPython"
    assert len(found.sha256) == 64
    assert older != newer


@pytest.mark.parametrize("manager", ["asdf", "mise"])
def test_asdf_and_mise_installs(
    manager: str, empty_machine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = (
        (empty_machine / ".asdf" if manager == "asdf" else empty_machine / ".local/share/mise")
        / "installs"
        / "python"
    )
    python = _install(base, f"{HERE}.4")
    found = find(HERE, None, None)
    assert (found.path, found.found_by) == (str(python), manager)


def test_a_broken_install_is_passed_over(empty_machine: Path, tmp_path: Path) -> None:
    root = tmp_path / "pyenv"
    broken = root / "versions" / f"{HERE}.99" / "bin" / f"python{HERE}"
    broken.parent.mkdir(parents=True)
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    good = _install(root / "versions", f"{HERE}.1")
    os.environ["PYENV_ROOT"] = str(root)
    try:
        assert find(HERE, None, None).path == str(good)
    finally:
        del os.environ["PYENV_ROOT"]


def test_an_explicit_path_wins_and_must_be_the_asked_version(
    empty_machine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = _install(tmp_path / "anywhere", "x")
    assert find(HERE, str(python), None).found_by == "explicit"
    monkeypatch.setenv(interpreters.ENV_VARIABLE, str(python))
    assert find(HERE, None, None).path == str(python)
    # not the asked version: bad input (exit 2), saying what it is
    with pytest.raises(BadInput) as err:
        find("3.99", str(python), None)
    assert err.value.exit_code == 2
    assert f"it is CPython {sys.version_info.major}.{sys.version_info.minor}" in err.value.message
    # not a Python at all, or not there
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    for bad in (text, tmp_path / "missing", tmp_path):
        find.cache_clear()
        with pytest.raises(BadInput):
            find(HERE, str(bad), None)


def test_the_fingerprint_is_the_code_not_the_path(tmp_path: Path) -> None:
    """The same interpreter at two paths has one fingerprint; other code has another."""
    a = _install(tmp_path / "a", "1")
    libpython = (interpreters.probe(REAL) or {}).get("libpython", "")
    copy = tmp_path / "b" / "python"
    copy.parent.mkdir()
    shutil.copy2(REAL, copy)
    assert find(HERE, str(a), None).sha256 == interpreters.fingerprint(str(copy), libpython)
    other = tmp_path / "other"
    other.write_bytes(Path(REAL).read_bytes() + b"\0")
    assert interpreters.fingerprint(str(other), libpython) != interpreters.fingerprint(
        REAL, libpython
    )


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The versions `find`'s search is run for, from here on (the search itself unchanged)."""
    calls: list[str] = []
    search = interpreters._search

    def counting(version: str, explicit_path: str | None, uv: str | None) -> Any:
        calls.append(version)
        return search(version, explicit_path, uv)

    monkeypatch.setattr(interpreters, "_search", counting)
    return calls


def test_a_search_started_ahead_is_the_one_find_answers_with(
    empty_machine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = _install(empty_machine / ".asdf" / "installs" / "python", f"{HERE}.4")
    calls = _counted(monkeypatch)
    interpreters.Search(HERE, None, None).wait()
    ahead = find(HERE, None, None)
    assert calls == [HERE]  # searched once, in the thread: find took its answer
    assert (ahead.path, ahead.found_by) == (str(python), "asdf")
    find.cache_clear()
    assert find(HERE, None, None) == ahead  # the same answer as a search of find's own
    assert calls == [HERE, HERE]


def test_an_error_ahead_is_raised_by_find_as_without_it(
    empty_machine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(PythonUnavailable) as plain:
        find("3.99", None, None)
    calls = _counted(monkeypatch)
    interpreters.Search("3.99", None, None).wait()  # raises nothing: the thread keeps quiet
    with pytest.raises(PythonUnavailable) as ahead:
        find("3.99", None, None)
    assert (ahead.value.message, ahead.value.hint) == (plain.value.message, plain.value.hint)
    assert calls == ["3.99", "3.99"]  # not kept: find searched again, and said it
    interpreters.Search("3.x", None, None).wait()
    with pytest.raises(BadInput, match=r"expected 3\.X"):
        find("3.x", None, None)


def test_a_runner_takes_the_answer_another_local_runner_started_ahead(
    empty_machine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vllm_plugin_release.edges.runner import LocalRunner

    _install(empty_machine / ".asdf" / "installs" / "python", f"{HERE}.4")  # if uv finds none
    calls = _counted(monkeypatch)
    LocalRunner("off").interpreter_ahead(HERE).wait()  # as stages/wheelbuild.interpreter_ahead
    found = LocalRunner("auto").interpreter(HERE)  # as the env stage's runner asks
    assert calls == [HERE]  # the same arguments: the search ahead, once
    find.cache_clear()
    assert LocalRunner("auto").interpreter(HERE) == found  # what its own search answers
    assert calls == [HERE, HERE]


def _searches_ended() -> None:
    """Wait for every interpreter search under way (one a stopped run left)."""
    import threading

    for thread in threading.enumerate():
        if thread.name == "vpr-interpreter":
            thread.join()


def test_a_search_a_stopped_run_left_is_not_the_answer_of_the_next_run(
    empty_machine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vllm_plugin_release.edges.runner import LocalRunner

    _install(empty_machine / ".asdf" / "installs" / "python", f"{HERE}.4")  # if uv finds none
    LocalRunner("off").interpreter_ahead(HERE)  # the first run starts it, then stops
    _searches_ended()
    find.cache_clear()  # the process forgets what it found
    named = _install(empty_machine / "named", HERE)
    monkeypatch.setenv(interpreters.ENV_VARIABLE, str(named))  # the next run names one
    found = LocalRunner("auto").interpreter(HERE)
    assert (found.path, found.found_by) == (str(named), "explicit")


def _unshare_mount_works() -> bool:
    import subprocess

    try:
        return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


def _interpreter_in_its_own_root(tmp_path: Path) -> tuple[Path, str]:
    """This CPython, run by a wrapper in a mount namespace of its own where its libpython
    sits at a folder that is empty for every other process (as a wrapper that runs a
    python in a container or another root does): (the wrapper, that libpython's path)."""
    import shlex

    answer = interpreters.probe(REAL) or {}
    lib, prefix = answer.get("libpython", ""), Path(answer.get("base_prefix", ""))
    if not lib or not _unshare_mount_works():
        pytest.skip("needs a shared-libpython CPython and `unshare -rm` (user namespaces)")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    copy = tmp_path / "copy"
    (copy / "bin").mkdir(parents=True)
    shutil.copy2(REAL, copy / "bin" / f"python{HERE}")  # its prefix is the copy's
    stdlib = prefix / "lib" / f"python{HERE}"
    mine = copy / "lib" / f"python{HERE}"
    mine.mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name.startswith("_sysconfigdata"):  # LIBDIR: the folder only it sees
            text = entry.read_text().replace(repr(str(Path(lib).parent)), repr(str(elsewhere)))
            (mine / entry.name).write_text(text)
        else:
            (mine / entry.name).symlink_to(entry)
    wrapper = tmp_path / f"python{HERE}"
    inside = f"mount --bind {shlex.quote(str(Path(lib).parent))} {shlex.quote(str(elsewhere))}"
    wrapper.write_text(
        f'#!/bin/sh\nexec unshare -rm /bin/sh -c \'{inside} && exec "$0" "$@"\' '
        f'{shlex.quote(str(copy / "bin" / f"python{HERE}"))} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper, str(elsewhere / Path(lib).name)


@pytest.mark.parametrize("source", ["--interpreter", interpreters.ENV_VARIABLE])
def test_an_interpreter_whose_libpython_is_not_here_names_the_flag_and_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    wrapper, lib = _interpreter_in_its_own_root(tmp_path)
    assert (interpreters.probe(str(wrapper)) or {}).get("libpython") == lib  # it answers
    if source != "--interpreter":
        monkeypatch.setenv(source, str(wrapper))
    with pytest.raises(BadInput) as err:  # not an OSError: [Errno 2] naming only the file
        find(HERE, str(wrapper) if source == "--interpreter" else None, None)
    message = err.value.message
    assert message.startswith(f"{source} {wrapper}: ") and f"libpython {lib}" in message
    assert err.value.exit_code == 2


def test_a_searched_interpreter_whose_libpython_is_not_here_is_passed_over(
    empty_machine: Path, tmp_path: Path
) -> None:
    wrapper, lib = _interpreter_in_its_own_root(tmp_path)
    versions = empty_machine / ".pyenv" / "versions" / f"{HERE}.1" / "bin"
    versions.mkdir(parents=True)
    (versions / f"python{HERE}").symlink_to(wrapper)
    try:  # not an OSError: the next place has its turn (this machine's /usr/bin may win)
        found = find(HERE, None, None)
    except PythonUnavailable as exc:
        assert f"libpython {lib} unreadable" in exc.message
    else:
        assert found.found_by != "pyenv" and found.path != str(wrapper)


# Every command that takes --interpreter (and so VPR_INTERPRETER), as a user runs it.
TAKES_INTERPRETER = {
    "build-core": ("build-core",),
    "build-plugin": ("build-plugin",),
    "env": ("env",),
    "plugin-tests": ("plugin-tests",),
    "conform": ("conform",),
    "check": ("check", "pinning"),
    "release": ("release", "--graph"),
    "build-image": ("build-image",),
}


SOURCES = ("--interpreter", interpreters.ENV_VARIABLE)


def _other_cpython() -> str:
    """A CPython of another minor version than this one (found on the real machine, before
    a test empties it), or a skip."""
    if OTHER is None:
        pytest.skip(f"no CPython but {HERE} here")
    return OTHER


CASES = [
    *((command, source, "missing") for command in sorted(TAKES_INTERPRETER) for source in SOURCES),
    *(("check", source, bad) for source in SOURCES for bad in ("another version", "not a python")),
]


@pytest.mark.parametrize(("command", "source", "bad"), CASES)
def test_every_command_that_takes_an_interpreter_checks_it_first(
    tmp_path: Path, command: str, source: str, bad: str
) -> None:
    from tests.support import REFERENCE_SPEC, vpr

    if bad == "missing":
        named = str(tmp_path / "nonexistent" / f"python{HERE}")
    elif bad == "another version":
        named = _other_cpython()
    else:
        (tmp_path / "notes").write_text("#!/bin/sh\necho hello\n")
        (tmp_path / "notes").chmod(0o755)
        named = str(tmp_path / "notes")
    argv = [*TAKES_INTERPRETER[command], "--spec", str(REFERENCE_SPEC)]
    argv += ["--cache-dir", str(tmp_path / ".vpr")]
    if command != "build-image":
        argv += ["--dist", str(tmp_path / "dist")]
    env = {interpreters.ENV_VARIABLE: ""}
    if source == "--interpreter":
        argv += ["--interpreter", named]
    else:
        env[source] = named
    done = vpr(*argv, env=env, cwd=tmp_path, check=False)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert f"{source} {named}: " in said and "Traceback" not in said
    if bad == "another version":
        assert f"{source} {named}: it is CPython 3." in said  # saying which it is
    assert not (tmp_path / "dist").exists()  # checked before anything was made


def _env_record(dist: Path, made_with: dict[str, str]) -> None:
    """dist/reference/env.json as `vpr env` writes it, made from `made_with`."""
    import json

    folder = dist / "reference"
    folder.mkdir(parents=True)
    record = {"python": str(folder / "venv" / "bin" / "python"), "runner": "cpu"}
    (folder / "env.json").write_text(json.dumps({**record, "interpreter": made_with}))


@pytest.mark.parametrize("command", [("conform",), ("check", "environment"), ("plugin-tests",)])
def test_a_recorded_environment_made_from_another_interpreter_is_refused(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """`--interpreter` names this CPython; the pairing environment in dist/ was made from
    another 3.X (another fingerprint): the checks are not run in it in this one's name."""
    from tests.support import REFERENCE_SPEC, vpr

    spec_python = "3.11"  # buildspec/reference.toml's [build] python
    if spec_python != HERE:
        pytest.skip(f"needs CPython {spec_python} to run the tests")
    other = {"version": "3.11.0", "path": "/opt/other/bin/python3.11", "sha256": "0" * 64}
    _env_record(tmp_path / "dist", other)
    argv = [*command, "--spec", str(REFERENCE_SPEC), "--dist", str(tmp_path / "dist")]
    argv += ["--cache-dir", str(tmp_path / ".vpr"), "--interpreter", REAL]
    done = vpr(*argv, cwd=tmp_path, env={interpreters.ENV_VARIABLE: ""}, check=False)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert f"--interpreter {REAL}" in said and "made from CPython 3.11.0 at /opt/other" in said


def test_the_environment_made_from_the_named_interpreter_is_used(tmp_path: Path) -> None:
    from dataclasses import replace

    from tests.support import REFERENCE_SPEC
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.conform import Context, Sources
    from vllm_plugin_release.core.cache import Cache

    here = interpreters.explicit(REAL, HERE, "--interpreter")
    spec = load_spec(REFERENCE_SPEC)
    none = Sources(plugin_root=lambda: tmp_path, core_tree=lambda: tmp_path)
    ctx = Context(spec, "cpu", Cache(tmp_path / ".vpr"), tmp_path / "dist" / "reference", none)
    ctx.refuse_other_interpreter(here, "--interpreter")  # no environment recorded yet
    _env_record(tmp_path / "dist", here.record())
    ctx.refuse_other_interpreter(here, "--interpreter")  # the one it was made from
    ctx.refuse_other_interpreter(None, "--interpreter")  # none named
    with pytest.raises(BadInput, match="VPR_INTERPRETER"):
        ctx.refuse_other_interpreter(replace(here, sha256="1" * 64), "VPR_INTERPRETER")


def test_a_bare_name_is_the_program_of_that_name_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / f"vpr-test-python{HERE}").symlink_to(REAL)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    found = find(HERE, f"vpr-test-python{HERE}", None)
    assert found.path == str(folder / f"vpr-test-python{HERE}") and found.found_by == "explicit"
    with pytest.raises(BadInput) as err:
        find(HERE, "vpr-no-such-python", None)
    assert err.value.message.startswith("--interpreter vpr-no-such-python: not an executable")
