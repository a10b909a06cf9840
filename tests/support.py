"""Test support: the repository paths, the CLI in a subprocess, a real PEP 691/503 index on
loopback, tiny sdists, git helpers and the smallest valid buildspec."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm_plugin_release.buildspec.model import Spec

REPO = Path(__file__).resolve().parent.parent
REFERENCE_SPEC = REPO / "buildspec" / "reference.toml"


def vpr(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None, check: bool = True):
    """Run the real CLI in a subprocess."""
    done = subprocess.run(
        [sys.executable, "-m", "vllm_plugin_release", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"vpr {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done


def repo_state() -> str:
    """The repository's `git status` (untracked files too): a fuzzer compares it before and
    after, so that nothing it ran wrote into the repository."""
    done = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    """Serve on a daemon thread. A short poll interval keeps `server.shutdown()` quick: with
    the default (0.5 s) every test that stops a loopback server waits half a second."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    return thread


def make_sdist(members: dict[str, bytes], *, top: str = "vllm-0.0.1") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            info.mtime = 1700000000
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Index:
    """A PEP 691/503 simple index served from memory on 127.0.0.1."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.listed_sha: dict[str, str] = {}
        self.truncate: set[str] = set()
        self.html = False
        self.hits: list[str] = []
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                index.hits.append(self.path)
                if self.path == "/simple/vllm/":
                    self._listing()
                elif self.path.startswith("/files/"):
                    self._file(self.path.removeprefix("/files/"))
                else:
                    self.send_error(404)

            def _listing(self) -> None:
                entries = [
                    {
                        "filename": name,
                        "url": f"/files/{name}",
                        "hashes": {
                            "sha256": index.listed_sha.get(name, hashlib.sha256(data).hexdigest())
                        },
                    }
                    for name, data in index.files.items()
                ]
                if index.html:
                    body = "".join(
                        f'<a href="{e["url"]}#sha256={e["hashes"]["sha256"]}">{e["filename"]}</a>'
                        for e in entries
                    ).encode()
                    ctype = "text/html"
                else:
                    body = json.dumps({"files": entries}).encode()
                    ctype = "application/vnd.pypi.simple.v1+json"
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _file(self, name: str) -> None:
                data = index.files.get(name)
                if data is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if name in index.truncate:
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"
        self.thread = serve_in_thread(self.server)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def git(*args: str, cwd: Path, date: str | None = None) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    if date:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def committed_copy(folder: Path, dest: Path) -> str:
    """`dest`: a git repository holding a copy of `folder` in one commit at a fixed date
    (a synthetic plugin as a checkout); returns the commit."""
    import shutil

    shutil.copytree(folder, dest)
    git("init", "-q", "-b", "main", cwd=dest)
    git("add", ".", cwd=dest)
    git("commit", "-q", "-m", "synthetic", cwd=dest, date="2026-08-01T12:00:00+00:00")
    return git("rev-parse", "HEAD", cwd=dest)


# sha256 of vllm-0.26.0.tar.gz on PyPI (the pin of the shipped buildspecs)
VLLM_SHA = "23e9fa19d7e20ce7dcc1c074d41503e2116d23f19e688f5d5ea91b741f958502"


def spec_head(
    name: str = "demo",
    *,
    core: str = "0.26.0",
    sha: str = "a" * 64,
    epoch: int = 1784975730,
) -> str:
    """The smallest valid buildspec ([core] and [build]); tests append the tables they need."""
    return f"""spec_version = 1
name = "{name}"

[core]
name = "vllm"
version = "{core}"
target_device = "empty"
source_date_epoch = {epoch}

[core.source]
kind = "sdist"
sha256 = "{sha}"

[build]
python = "3.11"
backend = "local"
"""


def api_spec(api_table: dict[str, Any] | None = None, name: str = "api-test") -> Spec:
    """A validated Spec (as `load_spec` makes it) with an optional [conformance.api] table."""
    from vllm_plugin_release.buildspec import model as spec_mod
    from vllm_plugin_release.buildspec.load import validate
    from vllm_plugin_release.conform.registry import spec_schema

    data: dict[str, Any] = {
        "spec_version": 1,
        "name": name,
        "core": {
            "name": "vllm",
            "version": "0.26.0",
            "target_device": "empty",
            "source_date_epoch": 1700000000,
            "source": {"kind": "sdist", "sha256": "0" * 64},
        },
        "build": {"python": "3.11", "backend": "local"},
    }
    if api_table is not None:
        data["conformance"] = {"api": api_table}
    path = REPO / "buildspec" / f"{name}.toml"
    validate(data, path, "", spec_schema())  # as `load_spec` does
    return spec_mod.from_data(data, path)


REFERENCE_SCHEDULER = "vllm_reference_plugin.scheduler:ReferenceScheduler"

# Small but loaded: bursts of 6 arrive faster than the device drains them, so a
# token-budget scheduler mixes new prompts into running decodes. Two prompts are
# longer than max_model_len (1024) and must be reported as rejected.
SMALL_MIX = """
[conformance.request_mix]
requests = 36
seed = 11
arrival = {{process = "bursts", size = 6, interval = 0.05}}
prompt_tokens = {{dist = "empirical", values = [40, 90, 200, 350, 700, 1500]}}
output_tokens = {{dist = "uniform", min = 4, max = 24}}

[conformance.replay]
plugin_scheduler = "{plugin}"
policy = "{policy}"
max_model_len = 1024
max_num_seqs = 8
max_num_batched_tokens = 256
block_size = 16
cost_model = {{a = 0.002, b = 0.00002, c = 0.0001}}
"""


def replay_spec(
    folder: Path, name: str, plugin: str = REFERENCE_SCHEDULER, policy: str = "reference"
) -> Path:
    """A buildspec with SMALL_MIX and a [conformance.replay] table, in `folder`."""
    (folder / "pyproject.toml").write_text("")
    spec = folder / f"{name}.toml"
    spec.write_text(spec_head(name) + SMALL_MIX.format(plugin=plugin, policy=policy))
    return spec


def installer_spec(
    tmp_path: Path, plugin: Path, name: str, table: str = "", core: str = "0.26.0"
) -> tuple[Path, Path]:
    """A copy of a synthetic plugin whose `docker/Dockerfile` is its installer, and a spec
    pairing it with `core` (plus `table`, e.g. `[conformance.pinning]`): (spec, root)."""
    import shutil

    root = tmp_path / "plugin"
    shutil.copytree(plugin, root)
    text = spec_head(core=core, sha="a" * 64) + (
        f'\n[plugin]\nname = "{name}"\ninstaller = "docker/Dockerfile"\n'
        '\n[plugin.source]\nkind = "path"\npath = "plugin"\n' + table
    )
    (tmp_path / "spec.toml").write_text(text)
    return tmp_path / "spec.toml", root


def script(name: str) -> types.ModuleType:
    """scripts/NAME.py loaded as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def interpreter_or_skip(python: str):
    """This machine's CPython `python` as vpr finds it; a skip naming where it looked, or a
    failure where the run requires it (VPR_REQUIRE_PYTHONS, set by .ci/run)."""
    import shutil

    import pytest

    from vllm_plugin_release.core.errors import PythonUnavailable
    from vllm_plugin_release.edges import interpreters

    try:
        return interpreters.find(python, None, shutil.which("uv"))
    except PythonUnavailable as exc:
        if python in os.environ.get("VPR_REQUIRE_PYTHONS", "").split(","):
            raise
        pytest.skip(f"no CPython {python} here: {exc.message.splitlines()[0]}")


def other_cpython(version: str) -> str | None:
    """A CPython of another minor version than `version` ("3.11" or "3.11.7") on this
    machine, as vpr finds it (pyenv's shims answer only for the global one); None if none."""
    from vllm_plugin_release.core.errors import VprError
    from vllm_plugin_release.edges import interpreters

    minor = ".".join(version.split(".")[:2])
    for other in ("3.10", "3.12", "3.13", "3.11", "3.9"):
        if other == minor:
            continue
        try:
            return interpreters.find(other, None, None).path
        except VprError:
            continue
    return None


def env_build(spec: Spec, folder: Path) -> Any:
    """A pairing env's inputs (`stages.pairing_env._EnvBuild`) for a test of what is done
    with an environment's checks: a local runner, a cache in `folder`, no real wheels."""
    from vllm_plugin_release.core.buildrecord import parse
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.edges.runner import LocalRunner
    from vllm_plugin_release.stages.pairing_env import _EnvBuild

    core_wheel = {"filename": "core.whl", "sha256": "c" * 64}
    plugin_wheel = {"filename": "plugin.whl", "sha256": "d" * 64}
    from vllm_plugin_release.stages.requests import runtime_plan

    return _EnvBuild(
        spec,
        LocalRunner("off"),
        Cache(folder / ".vpr"),
        "cpu",
        folder / "env.txt",
        "ab" * 32,
        parse({"core": {"name": "vllm"}, "wheel": core_wheel}, "build-core.json"),
        parse({"plugin": {"name": "p"}, "wheel": plugin_wheel}, "build-plugin.json"),
        folder / "core.whl",
        folder / "plugin.whl",
        runtime_plan(spec, "cpu", None),
        None,
        None,
        None,
    )


def shell_commands(text: str, file: str = "<shell>") -> list[Any]:
    """The simple commands of a shell script, in order, as the installer scan reads them."""
    from vllm_plugin_release.conform.lib.shell import Shell, State, numbered

    return Shell(Path("."), [], []).run_text(numbered(text), file, State())


def visible_text(page: str) -> str:
    """An HTML page's visible text: its tags and style sheet dropped, entities decoded."""
    import html
    import re

    without_style = re.sub(r"<style>.*?</style>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", without_style))
