"""stages/pairing_env.PairingContext: the pairing a flow builds once and hands the env stage."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import REFERENCE_SPEC
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges.interpreters import Interpreter
from vllm_plugin_release.edges.plugin_source import PluginSource
from vllm_plugin_release.edges.runner import LocalRunner
from vllm_plugin_release.stages.pairing_env import PairingContext


def _pairing(tmp_path: Path, **kw: object) -> PairingContext:
    plugin = PluginSource(tmp_path / "plugin", "path", str(tmp_path / "plugin"), None, 0)
    spec = load_spec(REFERENCE_SPEC)
    return PairingContext(spec, Cache(tmp_path / "c"), tmp_path / "dist", plugin, tmp_path, **kw)  # type: ignore[arg-type]


class Counting(LocalRunner):
    """This machine's runner, counting how often it is asked for an interpreter."""

    asked = 0

    def interpreter(self, version: str) -> Interpreter:
        Counting.asked += 1
        return super().interpreter(version)


def test_what_it_says_of_the_pairing(tmp_path: Path) -> None:
    pairing = _pairing(tmp_path)
    assert pairing.dist == tmp_path / "dist" / "reference"
    assert (pairing.site, pairing.runtime_env) == ("cpu", None)
    with pytest.raises(AttributeError):  # frozen
        pairing.site = "hardware"  # type: ignore[misc]


def test_an_unknown_site_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="unknown runner 'gpu'") as info:
        _pairing(tmp_path, site="gpu")
    assert info.value.exit_code == 2


def test_the_interpreter_is_resolved_once(tmp_path: Path) -> None:
    pairing = _pairing(tmp_path)
    Counting.asked = 0
    first = pairing.interpreter(Counting("off"))
    assert first is not None and first.version.startswith(pairing.spec.build.python)
    assert pairing.interpreter(Counting("off")) is first and Counting.asked == 1
    # a runtime environment brings its own python: none is looked for
    runtime = _pairing(tmp_path, site="hardware", runtime_env=tmp_path / "rt")
    assert runtime.interpreter(Counting("off")) is None and Counting.asked == 1
