"""A warm `vpr build-core` through the real command line (a tiny core from a loopback
index): the memo's hit delivers the full path's bytes without loading the stage, and each
change (spec, source tree, cached record, cached wheel, lock) takes the full path, which
does what it always did (reuse, re-extract, rebuild, exit 2)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.integration.test_build_core import index, tiny_spec  # noqa: F401 (a fixture)
from tests.support import Index, other_cpython, vpr

FULL = "vllm_plugin_release.stages.build_core"  # imported by the full path only


def _run(
    spec: Path, dist: Path, cache: Path, cwd: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[int, str, str, bool]:
    """(exit code, stdout, stderr, whether the full path ran)."""
    args = ["--spec", str(spec), "--dist", str(dist), "--cache-dir", str(cache), *extra]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "vllm_plugin_release", "build-core", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "VPR_INTERPRETER": "", **(env or {})},
    )
    lines = done.stderr.splitlines()
    said = "\n".join(line for line in lines if not line.startswith("import time:"))
    return done.returncode, done.stdout, said, any(FULL in line for line in lines)


def _outputs(dist: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((dist / "tiny").iterdir())}


def test_warm_hits_and_each_change_takes_the_full_path(tmp_path: Path, index: Index) -> None:  # noqa: F811
    spec = tiny_spec(tmp_path, index, stamp='"STAMP = 1\\n"')
    cache = tmp_path / ".vpr"
    vpr("lock", "--spec", str(spec), "--cache-dir", str(cache), cwd=tmp_path)
    cold = tmp_path / "cold"
    code, _, err, full = _run(spec, cold, cache, tmp_path)
    assert code == 0 and full, err
    built = _outputs(cold)

    def warm(expect_full: bool, dist: Path = tmp_path / "warm", reused: bool = True) -> str:
        code, out, err, full = _run(spec, dist, cache, tmp_path)
        assert code == 0, err
        assert full is expect_full, err
        assert ("cached result reused" in err) is reused, err
        assert out.strip() == str(dist / "tiny" / sorted(built)[-1])
        assert _outputs(dist) == built  # byte for byte the full path's
        return err

    warm(expect_full=False)
    warm(expect_full=False, dist=cold)  # over its own earlier output

    spec.write_text(spec.read_text() + "# an edit\n")
    warm(expect_full=True)
    warm(expect_full=False)

    (tree,) = (cache / "src").iterdir()
    setup_py = next(tree.iterdir()) / "setup.py"
    setup_py.write_text(setup_py.read_text() + "# changed\n")
    assert "re-extracting" in warm(expect_full=True)
    warm(expect_full=False)

    (stage,) = (p for p in (cache / "stages" / "build-core").iterdir() if p.is_dir())
    record = stage / "build-core.json"
    kept = record.read_bytes()
    record.write_bytes(kept.replace(b'"builds_compared": 2', b'"builds_compared": 3'))
    assert record.read_bytes() != kept
    code, _, err, full = _run(spec, tmp_path / "warm", cache, tmp_path)
    assert code == 0 and full, err
    record.write_bytes(kept)
    warm(expect_full=True)
    warm(expect_full=False)

    wheel = stage / sorted(built)[-1]
    wheel.write_bytes(wheel.read_bytes() + b"tampered")
    assert "rebuilding" in warm(expect_full=True, reused=False)  # the same bytes again
    warm(expect_full=False)

    lock = tmp_path / "project" / "constraints" / "build-core-py311.txt"
    lock.write_text(lock.read_text() + "# an edit\n")
    code, _, err, full = _run(spec, tmp_path / "warm", cache, tmp_path)
    assert code == 2 and full, err
    assert "lock body was edited" in err and "Traceback" not in err


def test_a_named_interpreter_is_checked_on_every_path(tmp_path: Path, index: Index) -> None:  # noqa: F811
    """With the core's wheel cached (full path and memo alike), an interpreter named by
    --interpreter or VPR_INTERPRETER is still checked (not there, another version: exit 2
    naming it), and a cached wheel built with another one is not reused silently."""
    spec = tiny_spec(tmp_path, index, stamp='"STAMP = 1\\n"')
    cache, dist = tmp_path / ".vpr", tmp_path / "dist"
    vpr("lock", "--spec", str(spec), "--cache-dir", str(cache), cwd=tmp_path)
    code, _, err, _ = _run(spec, dist, cache, tmp_path)
    assert code == 0, err
    made = json.loads((dist / "tiny" / "build-core.json").read_text())["interpreter"]
    bad: list[tuple[tuple[str, ...], dict[str, str], str]] = [
        (("--interpreter", "/nonexistent"), {}, "--interpreter /nonexistent"),
        ((), {"VPR_INTERPRETER": "/x"}, "VPR_INTERPRETER /x"),
    ]
    for flag, env, said in bad:
        code, _, err, _ = _run(spec, dist, cache, tmp_path, *flag, env=env)
        assert code == 2 and f"{said}: not an executable file" in err, err

    named = tmp_path / "named-python"  # the interpreter the wheel was built with, by name
    named.symlink_to(made["path"])
    for expect_full in (True, False):  # the full path reuses it, then the memo does
        code, _, err, full = _run(spec, dist, cache, tmp_path, "--interpreter", str(named))
        assert code == 0 and full is expect_full and "cached result reused" in err, err
    other = other_cpython(made["version"])
    if other:  # the named path now holds another version: the memo does not answer for it
        named.unlink()
        named.symlink_to(other)
        code, _, err, _ = _run(spec, dist, cache, tmp_path, "--interpreter", str(named))
        assert code == 2 and f"--interpreter {named}: it is CPython" in err, err

    python = f"python{made['version'].rsplit('.', 1)[0]}"
    same_minor = [
        p
        for p in {os.path.realpath(q) for q in (shutil.which(python), f"/usr/bin/{python}") if q}
        if os.path.isfile(p) and os.path.realpath(made["path"]) != p
    ]
    if not same_minor:
        return  # one CPython of that version here: nothing else to build with
    code, _, err, _ = _run(spec, dist, cache, tmp_path, "--interpreter", same_minor[0])
    assert code == 0 and "the cached result was built with CPython" in err, err
    assert f"--interpreter names {same_minor[0]}" in err and "cached result reused" not in err
    rebuilt = json.loads((dist / "tiny" / "build-core.json").read_text())["interpreter"]
    assert rebuilt["path"] == same_minor[0]
