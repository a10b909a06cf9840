"""`vpr install` creates the pairing's environment on the interpreter this machine has for
the certified Python, found as the build found it (explicit path, uv, pyenv, asdf/mise,
/usr/bin), and never lets uv download one (an interpreter from the network is neither
pinned nor verified). Known-bad: a Python no place here has stops with exit 3, naming
where it looked, and leaves no environment behind."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.pairing import ledger_manifest
from tests.support import interpreter_or_skip
from vllm_plugin_release.core.errors import PythonUnavailable
from vllm_plugin_release.core.manifestmodel import Manifest
from vllm_plugin_release.flows import install


def _with_python(version: str) -> Manifest:
    """A typed manifest whose core was built on Python `version` (what _sync reads)."""
    import dataclasses

    base = ledger_manifest("0" * 64, ("1.0", None), ("demo", None), "pilot")
    return dataclasses.replace(base, core=dataclasses.replace(base.core, python=version))


def test_the_environment_is_made_on_the_interpreter_found_here(tmp_path: Path) -> None:
    found = interpreter_or_skip("3.10")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("")
    env = tmp_path / "env"
    manifest = _with_python(found.version)
    install._sync(install._Sync(manifest, env, "", 0, []), requirements, [], offline=True)
    said = subprocess.run(
        [str(env / "bin" / "python"), "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert said.stdout.strip() == found.version


def test_a_python_this_machine_lacks_is_named_not_downloaded(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("")
    env = tmp_path / "env"
    with pytest.raises(PythonUnavailable) as caught:
        job = install._Sync(_with_python("3.99.1"), env, "", 0, [])
        install._sync(job, requirements, [], offline=False)
    assert "3.99" in caught.value.message and "pyenv" in caught.value.message
    assert not env.exists()
