"""The documented exit codes, end to end through the real CLI: 0 ok, 1 a gate failed,
2 bad input, 3 an outside failure; each error class carries its own, and `vpr` exits
with it (CI and nox tell the classes apart by these numbers alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import vpr
from vllm_plugin_release.core import errors


def test_each_error_class_carries_its_documented_code() -> None:
    assert (errors.EXIT_OK, errors.EXIT_GATE, errors.EXIT_BAD_INPUT, errors.EXIT_OUTSIDE) == (
        0,
        1,
        2,
        3,
    )
    assert errors.GateFailed("x").exit_code == 1
    assert errors.BadInput("x").exit_code == 2
    assert errors.OutsideFailure("x").exit_code == 3
    assert errors.PythonUnavailable("x").exit_code == 3
    assert errors.VprError("x").exit_code == 3  # unclassified: never passed off as bad input
    said = str(errors.BadInput("what", hint="do this"))
    assert said == "what\n  hint: do this" and str(errors.GateFailed("only")) == "only"


@pytest.fixture
def key(tmp_path: Path) -> Path:
    done = vpr("keygen", "--out", str(tmp_path / "k.key"), cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr  # 0: ok
    return tmp_path / "k.key.pub"


def test_the_cli_exits_with_the_class_of_what_went_wrong(tmp_path: Path, key: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "index.json").write_text("{}\n")  # a store whose head is missing: a gate
    cases = {
        1: ["manifest", "query", "--store", str(store), "--key", str(key)],
        2: ["manifest", "verify", str(tmp_path / "missing.json"), "--key", str(key)],
        3: ["manifest", "query", "--store", "http://127.0.0.1:9/", "--key", str(key)],
    }
    for code, argv in cases.items():
        done = vpr(*argv, cwd=tmp_path, check=False)
        assert done.returncode == code, (argv, done.stderr)
        assert "vpr error" in done.stderr and "Traceback" not in done.stderr
    bare = vpr("manifest", cwd=tmp_path, check=False)  # a group without its command
    assert bare.returncode == 2 and "usage: vpr manifest" in bare.stderr
