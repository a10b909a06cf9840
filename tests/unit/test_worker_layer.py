"""A job run as an overlay venv's python (the stand-in runtime's, layered on the pairing
env) in the pairing env's warm worker: the same sys.path and modules as that python run
alone, and that python itself when the overlay brings a module the worker imported."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit import test_envrun
from tests.unit.test_envrun import Probe
from vllm_plugin_release.edges import envrun
from vllm_plugin_release.inenv import worker as inenv_worker

bare_python = test_envrun.bare_python

PROBE = """
import json, sys
import vpr_stand_in, vpr_extra
try:
    import vpr_pre
    pre_mine = vpr_pre.MINE
except ImportError:
    pre_mine = None
json.dump({
    "path": sys.path[1:],
    "stand_in": vpr_stand_in.__file__,
    "extra": vpr_extra.__file__,
    "preloaded": "colorsys" in sys.modules,
    "pre_mine": pre_mine,
}, open(sys.argv[2], "w"))
"""


def _site(env: Path) -> Path:
    return next((env / "lib").glob("python3.*/site-packages"))


@pytest.fixture
def overlay(bare_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A venv made with the bare env's python that sees its packages through a .pth file
    (as pairing_env._stand_in_check makes one), with a module of its own and a .pth of its own."""
    venv = tmp_path / "overlay"
    subprocess.run([str(bare_python), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = _site(venv)
    (site / "_vpr_pairing_env.pth").write_text(f"{_site(bare_python.parent.parent)}\n")
    (site / "vpr_stand_in.py").write_text("VALUE = 1\n")
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "vpr_extra.py").write_text("")
    (site / "zz_extra.pth").write_text(f"{extra}\n")
    folder = tmp_path / "inenv"
    folder.mkdir()
    shutil.copyfile(envrun.INENV / "worker.py", folder / "worker.py")
    (folder / "probe.py").write_text(PROBE)
    monkeypatch.setattr(envrun, "INENV", folder)
    monkeypatch.setattr(envrun, "PRELOAD", ("colorsys",))
    monkeypatch.setattr(envrun, "PRELOAD_LATER", ())
    monkeypatch.setattr(envrun, "EARLY_JOBS", ("probe",))
    return venv


def test_the_exit_code_of_a_refused_layer_is_the_same_on_both_sides() -> None:
    assert envrun.LAYER_REFUSED == inenv_worker.LAYER_REFUSED


def test_a_job_in_the_worker_sees_what_the_overlays_python_sees(
    bare_python: Path, overlay: Path
) -> None:
    alone = envrun.run_in_env(bare_python, Probe("probe", {}), overlay=overlay)
    with envrun.warm(bare_python) as worker:
        assert worker is not None and worker.wait_ready(60)
        warm = envrun.run_in_env(bare_python, Probe("probe", {}), overlay=overlay)
    # known-bad first: the job really ran in the worker (colorsys preloaded), the other not
    assert warm["preloaded"] is True and alone["preloaded"] is False
    assert warm["path"] == alone["path"]  # the overlay's site-packages before the env's
    assert warm["stand_in"] == alone["stand_in"] == str(_site(overlay) / "vpr_stand_in.py")
    assert warm["extra"] == alone["extra"]  # the overlay's own .pth files were read


def test_an_overlay_that_brings_a_preloaded_module_runs_in_its_own_python(
    bare_python: Path, overlay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (_site(bare_python.parent.parent) / "vpr_pre.py").write_text("MINE = False\n")
    (_site(overlay) / "vpr_pre.py").write_text("MINE = True\n")  # shadows the preloaded one
    monkeypatch.setattr(envrun, "PRELOAD", ("colorsys", "vpr_pre"))
    try:
        alone = envrun.run_in_env(bare_python, Probe("probe", {}), overlay=overlay)
        with envrun.warm(bare_python) as worker:
            assert worker is not None and worker.wait_ready(60)
            assert worker.ready is not None and "vpr_pre" in worker.ready["preloaded"]
            warm = envrun.run_in_env(bare_python, Probe("probe", {}), overlay=overlay)
    finally:
        (_site(bare_python.parent.parent) / "vpr_pre.py").unlink()
    assert alone["pre_mine"] is True
    assert warm == alone  # refused by the worker, run by the overlay's python


def test_layer_first_gives_the_path_of_the_overlays_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    env_site, extra = tmp_path / "env" / "site-packages", tmp_path / "extra"
    layer = tmp_path / "overlay" / "site-packages"
    for folder in (env_site, extra, layer):
        folder.mkdir(parents=True)
    (layer / "a.pth").write_text(f"{env_site}\n")
    (layer / "b.pth").write_text(f"{extra}\n")
    (layer / "vpr_layer_mod.py").write_text("")
    # "/env-pth": what a .pth file of the env's own added (the overlay's python has not)
    monkeypatch.setattr("sys.path", ["/script", "/stdlib", str(env_site), "/env-pth"])
    assert inenv_worker.layer_first(str(layer)) == []
    assert sys.path == ["/script", "/stdlib", str(layer), str(env_site), str(extra)]
    # refused, nothing changed: a package imported here already ...
    (layer / "json").mkdir()
    monkeypatch.setattr("sys.path", ["/script", str(env_site)])
    assert inenv_worker.layer_first(str(layer)) == ["json (imported by the worker already)"]
    assert sys.path == ["/script", str(env_site)]
    # ... or an overlay that does not see this environment
    (layer / "json").rmdir()
    (layer / "a.pth").unlink()
    assert inenv_worker.layer_first(str(layer)) != []
    assert sys.path == ["/script", str(env_site)]


def test_the_overlays_check_starts_once_the_later_modules_are_in(
    bare_python: Path, overlay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An early job with an overlay (the stand-in overlay's env check, after the pairing
    env's) waits for PRELOAD_LATER: the plugin's modules import it, and forked before it
    is in, the job imported it again beside the worker and the first check."""
    monkeypatch.setattr(envrun, "PRELOAD_LATER", ("wave",))
    probe = envrun.INENV / "probe.py"
    later = '"later": "wave" in sys.modules,'
    probe.write_text(
        probe.read_text().replace('"pre_mine": pre_mine,', f'"pre_mine": pre_mine, {later}')
    )
    with envrun.warm(bare_python) as worker:
        assert worker is not None
        layered = envrun.run_in_env(bare_python, Probe("probe", {}), overlay=overlay)
    assert layered["preloaded"] is True and layered["later"] is True
