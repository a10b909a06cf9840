"""A hostile manifest store against its consumers (`vpr install`, `vpr manifest check-env`):
a real store made by `vpr publish` (two pairings, a pairing re-certified lab, its ledger),
then copied and edited as an attacker who can write the store's files (but not sign) would,
or re-published by its own publisher from an old folder. Whatever the store says, no
command installs another pairing than the one asked for, writes outside its folders,
reads a local file for the store, or ends with a traceback.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import locked_project, make_pairing, typed, vpr, write_spec, write_wheel
from tests.support import serve_in_thread
from vllm_plugin_release.core import ledger
from vllm_plugin_release.edges import keys, trust
from vllm_plugin_release.edges.store import DirStore
from vllm_plugin_release.edges.uv import uv_bin

PLUGIN = "vpr-test-plugin"


def _publish(root: Path, spec: Path, store: Path, *more: str) -> str:
    done = vpr("publish", "--spec", str(spec), "--store", str(store), "--json", *more, cwd=root)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["pairing_id"]


def _record(root: Path, store: Path, dist: Path) -> None:
    """One ledger line for dist's manifest, as `vpr release`'s ledger stage writes it."""
    key = keys.load_private_key(root / ".vpr" / keys.DEFAULT_KEY)
    data = (dist / "manifest.json").read_bytes()
    entry = ledger.entry_from_manifest(
        typed(json.loads(data)),
        manifest_sha256=hashlib.sha256(data).hexdigest(),
        runner="cpu",
        time="2026-12-01T00:00:00Z",
    )
    trust.append(DirStore(store), entry, key)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store holding pairing A (core 0.26.0), B (core 0.20.0, same plugin) and the ledger;
    A's pilot manifest is kept in old/ref/ before A is re-certified lab."""
    root = tmp_path_factory.mktemp("project")
    deps = locked_project(root)
    store = root / "store"
    spec_b = write_spec(root, "old", core_version="0.20.0")
    make_pairing(root / "dist" / "old", name="old", core_version="0.20.0")
    assert vpr("manifest", "build", "--spec", str(spec_b), cwd=root).returncode == 0
    pid_b = _publish(root, spec_b, store)
    spec = write_spec(root)
    make_pairing(root / "dist" / "ref")
    assert vpr("manifest", "build", "--spec", str(spec), cwd=root).returncode == 0
    pid_a = _publish(root, spec, store)
    _record(root, store, root / "dist" / "ref")
    _record(root, store, root / "dist" / "old")
    shutil.copytree(root / "dist" / "ref", root / "old" / "ref")
    pilot_store = root / "pilot-store"
    shutil.copytree(store, pilot_store)
    # A is certified again: a check now fails (lab), and the store and ledger say so
    make_pairing(root / "dist" / "ref", verdict="lab")
    assert vpr("manifest", "build", "--spec", str(spec), cwd=root).returncode == 0
    assert _publish(root, spec, store, "--allow-uncertified") == pid_a
    _record(root, store, root / "dist" / "ref")
    return {
        "root": root,
        "spec": spec,
        "store": store,
        "pilot_store": pilot_store,
        "a": pid_a,
        "b": pid_b,
        "env": {"VPR_FIND_LINKS": str(deps)},
    }


def _copy(p: dict[str, Any], tmp_path: Path, which: str = "pilot_store") -> Path:
    target = tmp_path / "store"
    shutil.copytree(p[which], target)
    return target


def _install(p: dict, store: Path | str, venv: Path, *args: str) -> subprocess.CompletedProcess:
    argv = ["install", *args, "--store", str(store), "--python-env", str(venv), "--offline"]
    return vpr(*argv, cwd=p["root"], env=p["env"])


def _index(store: Path) -> dict[str, Any]:
    return json.loads((store / "index.json").read_text())


def _write_index(store: Path, index: dict[str, Any]) -> None:
    (store / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _said(done: subprocess.CompletedProcess) -> str:
    return done.stdout + done.stderr


def _refused(done: subprocess.CompletedProcess, *codes: int) -> str:
    said = _said(done)
    assert done.returncode in (codes or (1, 2)), said
    assert "Traceback" not in said
    return said


# -- D1: the store chooses no path and no URL -------------------------------------------


def _escaped(tmp_path_factory: pytest.TempPathFactory, name: str) -> list[Path]:
    """Files called `name`* anywhere under pytest's temp root (the work folder is in there)."""
    return list(tmp_path_factory.getbasetemp().rglob(f"{name}*"))


def test_a_pairing_id_with_dotdot_writes_nothing_outside(
    project: dict, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    store = _copy(project, tmp_path)
    index = _index(store)
    entry = index["pairings"].pop(project["a"])
    evil = "../../../../vpr-store-escape"  # a name no other test writes
    entry["pairing_id"] = evil
    index["pairings"][evil] = entry
    _write_index(store, index)
    before = _files(project["root"])
    done = _install(project, store, tmp_path / "venv", "--core", "0.26.0", "--plugin", PLUGIN)
    _refused(done)
    assert not [f for f in _files(project["root"]) - before if "vpr-store-escape" in f]
    assert not _escaped(tmp_path_factory, "vpr-store-escape")
    assert not (tmp_path / "venv").exists()


@pytest.fixture
def served(tmp_path: Path):
    """serve(folder) -> the URL of `folder` served on loopback, for this test."""
    servers: list[ThreadingHTTPServer] = []

    def serve(folder: Path) -> str:
        handler = partial(SimpleHTTPRequestHandler, directory=str(folder))
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.RequestHandlerClass.log_message = lambda *a: None  # type: ignore[method-assign]
        serve_in_thread(server)
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def test_an_http_store_cannot_name_a_local_file(
    project, tmp_path: Path, served, tmp_path_factory: pytest.TempPathFactory
) -> None:
    store = _copy(project, tmp_path)
    secret = tmp_path / "secret.key"
    secret.write_text("-----BEGIN PRIVATE KEY----- the-secret-bytes\n")
    index = _index(store)
    entry = index["pairings"].pop(project["a"])
    entry["pairing_id"] = "../../../../stolen"
    entry["manifest"] = f"file://{secret}"
    entry["statement"] = f"file://{secret}"
    index["pairings"]["../../../../stolen"] = entry
    _write_index(store, index)
    done = _install(
        project, served(store), tmp_path / "venv", "--core", "0.26.0", "--plugin", PLUGIN
    )
    said = _refused(done)
    assert "the-secret-bytes" not in said
    assert not _escaped(tmp_path_factory, "stolen")


# -- D2: the manifest installed is the pairing asked for --------------------------------


def test_an_entry_swapped_to_another_signed_pairing_is_refused(project, tmp_path: Path) -> None:
    """Entry A (core 0.26.0) points at B's validly signed files (core 0.20.0): a downgrade."""
    store = _copy(project, tmp_path)
    index = _index(store)
    b = index["pairings"][project["b"]]
    index["pairings"][project["a"]].update(
        manifest=b["manifest"], statement=b["statement"], manifest_sha256=b["manifest_sha256"]
    )
    _write_index(store, index)
    done = _install(project, store, tmp_path / "venv", "--core", "0.26.0", "--plugin", PLUGIN)
    _refused(done, 1)
    assert not (tmp_path / "venv").exists()
    by_id = _install(project, store, tmp_path / "venv", project["a"][:12])
    _refused(by_id, 1)


def test_another_pairings_files_under_this_ones_name_are_refused(project, tmp_path) -> None:
    """pairings/A.json holds B's manifest and statement (both validly signed)."""
    store = _copy(project, tmp_path)
    pairings = store / "pairings"
    for suffix in (".json", ".intoto.jsonl"):
        shutil.copyfile(pairings / f"{project['b']}{suffix}", pairings / f"{project['a']}{suffix}")
    done = _install(project, store, tmp_path / "venv", project["a"][:12])
    said = _refused(done, 1)
    assert "0.20.0" not in said.split("installed:")[-1] if "installed:" in said else True
    assert not (tmp_path / "venv").exists()


# -- D3: a superseded verdict is not current --------------------------------------------


def test_a_superseded_verdict_replayed_by_a_republish_is_refused(project, tmp_path) -> None:
    """A was certified pilot, then lab (ledger: lab). Its publisher's CI publishes the old
    pilot folder again: the store now says pilot, the ledger's newest verdict says lab."""
    store = _copy(project, tmp_path, "store")
    root = project["root"]
    _publish(root, project["spec"], store, "--dist", str(root / "old"))
    assert _index(store)["pairings"][project["a"]]["verdict"] == "pilot"
    done = _install(project, store, tmp_path / "venv", project["a"][:12])
    said = _refused(done, 1)
    assert "lab" in said
    assert not (tmp_path / "venv").exists()


# -- D4: check-env verifies the manifest's signature ------------------------------------


def test_check_env_refuses_an_edited_manifest(project: dict, tmp_path: Path) -> None:
    """The environment holds `evil 1.0`; an edited lock pins it and the manifest was edited
    to name that lock's sha256: the signature no longer covers it."""
    venv = tmp_path / "venv"
    assert _install(project, project["pilot_store"], venv, project["a"][:12]).returncode == 0
    evil = write_wheel(tmp_path / "w", "evil", "1.0", {"evil/__init__.py": ""})
    python = str(venv / "bin" / "python")
    subprocess.run([uv_bin(), "pip", "install", "-q", "--python", python, "--", str(evil)],
                   check=True)  # fmt: skip
    copy = tmp_path / "copy"
    copy.mkdir()
    source = project["pilot_store"] / "pairings"
    manifest = json.loads((source / f"{project['a']}.json").read_text())
    lock = (source / f"{project['a']}.lock.txt").read_text() + "evil==1.0\n"
    (copy / "pairing.lock.txt").write_text(lock)
    manifest["environment"]["lock_sha256"] = hashlib.sha256(lock.encode()).hexdigest()
    (copy / "pairing.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    shutil.copyfile(source / f"{project['a']}.intoto.jsonl", copy / "pairing.intoto.jsonl")
    done = vpr(
        "manifest", "check-env", "--manifest", str(copy / "pairing.json"), "--python", python,
        cwd=project["root"],
    )  # fmt: skip
    said = _refused(done, 1)
    assert "signature" in said or "sha256" in said
    assert "OK" not in done.stdout


# -- D11: a user's path is never read as an option ----------------------------------------


@pytest.mark.parametrize("given", ["--python-env=--seed", "--python-env=./-seed"])
def test_a_python_env_named_like_an_option_is_a_folder(project, tmp_path: Path, given) -> None:
    """uv gets the folder absolute, after `--`: `--seed` is a folder named so, not uv's
    option (which would make a seeded `.venv` in the working folder instead)."""
    work = tmp_path / "work"
    work.mkdir()
    folder = work / given.split("=", 1)[1]
    argv = ["install", project["a"][:12], "--store", str(project["pilot_store"]), given]
    done = vpr(*argv, "--offline", cwd=work, env={**project["env"], "VPR_CACHE_DIR": str(
        project["root"] / ".vpr")})  # fmt: skip
    assert done.returncode == 0, _said(done)
    assert (folder / "bin" / "python").exists()
    assert not (work / ".venv").exists()
    assert sorted(p.name for p in work.iterdir()) == [folder.name]
