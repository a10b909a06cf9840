"""Making a container runner contacts no engine: its inputs are checked at once (exit 2),
the engine's work (connect, check the pinned image) waits for `with` or a first use, and
an engine that is not there is then named (exit 3). Needs no engine: DOCKER_HOST points
at a socket that does not exist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import REPO
from vllm_plugin_release.core.errors import BadInput, OutsideFailure
from vllm_plugin_release.edges.container import MARKER, ContainerRunner, runner_of
from vllm_plugin_release.edges.runner import LocalRunner

PINNED = "docker.io/library/python:3.11-slim@sha256:" + "a" * 64
DOCKERFILE = REPO / "docker" / "build.Dockerfile"


@pytest.fixture
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """DOCKER_HOST at a unix socket nothing listens on."""
    pytest.importorskip("docker")
    socket = tmp_path / "no-engine.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{socket}")
    return socket


def test_making_a_runner_contacts_no_engine_and_entering_names_the_missing_one(
    no_engine: Path, tmp_path: Path
) -> None:
    runner = ContainerRunner(PINNED, DOCKERFILE, [tmp_path])  # no engine: still made
    assert runner.kind == "docker" and runner.base_image == PINNED
    env = tmp_path / "env"
    env.mkdir()
    runner.mark(env)  # noting where an environment runs needs no engine either
    assert json.loads((env / MARKER).read_text())["base_image"] == PINNED
    with pytest.raises(OutsideFailure) as err, runner:
        pytest.fail("entered without an engine")
    assert err.value.exit_code == 3
    assert "no reachable container engine" in err.value.message
    assert str(no_engine) in err.value.message  # the engine it tried
    assert "DOCKER_HOST" in (err.value.hint or "")


def test_a_runner_used_outside_with_opens_on_first_use(no_engine: Path, tmp_path: Path) -> None:
    runner = ContainerRunner(PINNED, DOCKERFILE, [tmp_path])
    for use in (
        lambda: runner.image_id,
        runner.describe,
        lambda: runner.env_key,
        lambda: runner.call(["true"]),
        lambda: runner.interpreter("3.11"),
    ):
        with pytest.raises(OutsideFailure, match="no reachable container engine"):
            use()
    runner.close()  # never opened: nothing to release, and no error


def test_an_environments_runner_is_cheap_to_ask_for(no_engine: Path, tmp_path: Path) -> None:
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    ContainerRunner(PINNED, DOCKERFILE, [tmp_path]).mark(env)
    runner = runner_of(env / "bin" / "python")  # made from the marker, no engine asked
    assert runner.kind == "docker"
    assert runner_of(env / "bin" / "python") is runner  # one per marker
    with pytest.raises(OutsideFailure, match="no reachable container engine"):
        runner.call(["true"])


def test_bad_input_still_fails_when_the_runner_is_made(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="base_image is required") as err:
        ContainerRunner(None, DOCKERFILE, [])
    assert err.value.exit_code == 2
    with pytest.raises(BadInput, match="not pinned by digest"):
        ContainerRunner("docker.io/library/python:3.11-slim", DOCKERFILE, [])
    with pytest.raises(BadInput, match="Dockerfile not found"):
        ContainerRunner(PINNED, tmp_path / "missing.Dockerfile", [])
    unpinned = tmp_path / "unpinned.Dockerfile"
    unpinned.write_text("FROM docker.io/library/debian:bookworm\n")
    with pytest.raises(BadInput) as err:
        ContainerRunner(PINNED, unpinned, [])
    assert err.value.message.startswith(f"{unpinned}:1: ")
    assert "sha256" in (err.value.hint or "")


def test_a_local_runner_is_used_the_same_way() -> None:
    local = LocalRunner("off")
    with local as entered:
        assert entered is local
        assert entered.call(["true"]).returncode == 0


def test_connecting_asks_the_engine_only_for_a_ping_at_the_named_api_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`docker.from_env()` with version "auto" asks /version first: Podman 4 answers it
    slowly, a large part of a warm container build-core. A real HTTP server on a unix
    socket records what connect() asks."""
    pytest.importorskip("docker")
    import http.server
    import socketserver
    import threading

    from vllm_plugin_release.edges.container import ENGINE_API, connect

    asked: list[str] = []

    class Engine(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = b"OK" if self.path.endswith("/_ping") else b'{"ApiVersion": "1.41"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

        def address_string(self) -> str:  # a unix socket has no host
            return "engine"

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    sock = tmp_path / "engine.sock"
    server = Server(str(sock), Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    try:
        client = connect()
        client.close()
    finally:
        server.shutdown()
        server.server_close()
    assert asked == [f"/v{ENGINE_API}/_ping"]
