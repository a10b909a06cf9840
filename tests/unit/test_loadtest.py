"""`vpr loadtest` against a real OpenAI-compatible HTTP server on loopback.

The server is small but real (stdlib `ThreadingHTTPServer`, SSE streaming). Behind it
a one-device engine thread imitates a phase-separated scheduler: each step is either
a prefill (one waiting request's whole prompt: a + b * prompt_tokens) or a decode (one
token for every running request: a + c * running), never both, so running requests
stall while a new prompt is prefilled.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from queue import Empty, Queue
from typing import Any

import pytest

from tests.support import serve_in_thread, spec_head
from vllm_plugin_release.cli import main
from vllm_plugin_release.core.errors import OutsideFailure
from vllm_plugin_release.replay import loadtest
from vllm_plugin_release.replay.mix import RequestMix, generate

MODEL = "phase-model"


class PhaseEngine:
    """One device, one step at a time: prefill-only or decode-only."""

    def __init__(self, a: float, b: float, c: float, max_seqs: int = 8) -> None:
        self.a, self.b, self.c, self.max_seqs = a, b, c, max_seqs
        self.cond = threading.Condition()
        self.waiting: deque[tuple[int, int, Queue]] = deque()
        self.running: list[list[Any]] = []  # [tokens_left, queue]
        self.stopped = False
        self.counters = {"prompt_tokens": 0, "generation_tokens": 0, "requests": 0}
        self.steps = {"prefill": 0, "decode": 0}
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def submit(self, prompt_tokens: int, max_tokens: int) -> Queue:
        out: Queue = Queue()
        with self.cond:
            self.waiting.append((prompt_tokens, max_tokens, out))
            self.counters["requests"] += 1
            self.cond.notify()
        return out

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify()
        self.thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.stopped and not self.waiting and not self.running:
                    self.cond.wait()
                if self.stopped:
                    return
                if self.waiting and len(self.running) < self.max_seqs:
                    prompt, max_tokens, out = self.waiting.popleft()
                    kind = "prefill"
                else:
                    kind = "decode"
                    batch = list(self.running)
            if kind == "prefill":
                time.sleep(self.a + self.b * prompt)
                self.steps["prefill"] += 1
                self.counters["prompt_tokens"] += prompt
                self.counters["generation_tokens"] += 1
                out.put("tok")  # a prefill samples the first token
                with self.cond:
                    if max_tokens > 1:
                        self.running.append([max_tokens - 1, out])
                    else:
                        out.put(None)
            else:
                time.sleep(self.a + self.c * len(batch))
                self.steps["decode"] += 1
                with self.cond:
                    for entry in batch:
                        entry[0] -= 1
                        entry[1].put("tok")
                        self.counters["generation_tokens"] += 1
                        if entry[0] == 0:
                            entry[1].put(None)
                            self.running.remove(entry)


def make_handler(engine: PhaseEngine, state: dict[str, Any]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            pass

        def _json(self, code: int, payload: Any) -> None:
            body = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            elif self.path == "/metrics":
                c = engine.counters
                text = (
                    "# TYPE vllm:prompt_tokens_total counter\n"
                    f'vllm:prompt_tokens_total{{model_name="{MODEL}"}} {c["prompt_tokens"]}\n'
                    "# TYPE vllm:generation_tokens_total counter\n"
                    f'vllm:generation_tokens_total{{model_name="{MODEL}"}} '
                    f"{c['generation_tokens']}\n"
                    f'vllm:request_success_total{{model_name="{MODEL}"}} {c["requests"]}\n'
                    f"vllm:num_requests_running {len(engine.running)}\n"
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            request = json.loads(self.rfile.read(length))
            if self.path != "/v1/completions" or request.get("model") != MODEL:
                self._json(404, {"error": {"message": "unknown model or path"}})
                return
            state["posts"] += 1
            if state["hang_after"] is not None and state["posts"] > state["hang_after"]:
                state["release"].wait(30)  # never answers within the client's bound
                return
            prompt = request["prompt"]
            prompt_tokens = len(prompt) if isinstance(prompt, list) else len(prompt.split())
            max_tokens = int(request["max_tokens"])
            queue = engine.submit(prompt_tokens, max_tokens)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            produced = 0

            def send(payload: str) -> None:
                data = payload.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            while True:
                try:
                    item = queue.get(timeout=30)
                except Empty:
                    break
                if item is None:
                    break
                produced += 1
                event = {
                    "id": "cmpl-1",
                    "object": "text_completion",
                    "model": MODEL,
                    "choices": [{"index": 0, "text": " tok", "finish_reason": None}],
                }
                send(f"data: {json.dumps(event)}\n\n")
            usage = {
                "id": "cmpl-1",
                "object": "text_completion",
                "model": MODEL,
                "choices": [],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": produced},
            }
            send(f"data: {json.dumps(usage)}\n\n")
            send("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler


@pytest.fixture
def server() -> Iterator[dict[str, Any]]:
    """A phase-separated fake vLLM on 127.0.0.1 (random port)."""
    engine = PhaseEngine(a=0.002, b=0.0002, c=0.0005)
    state: dict[str, Any] = {"posts": 0, "hang_after": None, "release": threading.Event()}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(engine, state))
    httpd.daemon_threads = True
    serve_in_thread(httpd)
    host, port = httpd.server_address[:2]
    try:
        yield {"url": f"http://{host}:{port}", "engine": engine, "state": state}
    finally:
        state["release"].set()
        httpd.shutdown()
        httpd.server_close()
        engine.stop()


def _mix(requests: int = 12) -> RequestMix:
    return generate(
        {
            "requests": requests,
            "seed": 2,
            "arrival": {"process": "bursts", "size": 3, "interval": 0.15},
            "prompt_tokens": {"dist": "uniform", "min": 200, "max": 600},
            "output_tokens": {"dist": "uniform", "min": 10, "max": 25},
        },
        Path("."),
    )


def test_loadtest_measures_ttft_itl_and_metrics(server: dict[str, Any], tmp_path: Path) -> None:
    mix = _mix()
    out = tmp_path / "loadtest.json"
    result = loadtest.run(
        server["url"], mix, loadtest.LoadOptions(duration_s=60, request_timeout_s=30), out=out
    )
    assert result.error is None
    assert result.model == MODEL
    summary = result.to_json()["summary"]
    assert result.summary.to_json() == summary
    assert summary["requests"] == {
        "planned": 12,
        "sent": 12,
        "completed": 12,
        "errors": 0,
        "fewer_tokens_than_requested": 0,
    }
    assert summary["output_tokens"] == sum(mix.output)
    for record in result.to_json()["requests"]:
        assert record["output_tokens"] == mix.output[record["index"]]
        assert record["ttft_s"] is not None and record["ttft_s"] > 0
        # prefill time of its own prompt at least
        assert record["ttft_s"] >= 0.0002 * record["prompt_tokens"] * 0.9
        assert len(record["chunk_times_s"]) == record["output_tokens"]
    # Phase separation shows: some decode gap spans a whole prefill of another request.
    assert summary["itl_s"]["max"] >= 0.0002 * min(mix.prompt)
    assert summary["itl_s"]["p50"] < summary["itl_s"]["max"]
    # Metrics before/after, with the deltas the run caused.
    delta = result.to_json()["metrics"]["delta"]
    assert delta[f'vllm:generation_tokens_total{{model_name="{MODEL}"}}'] == sum(mix.output)
    assert delta[f'vllm:prompt_tokens_total{{model_name="{MODEL}"}}'] == sum(mix.prompt)
    assert json.loads(out.read_text())["summary"] == summary
    engine = server["engine"]
    assert engine.steps["prefill"] == 12


def test_loadtest_bounded_by_request_count(server: dict[str, Any]) -> None:
    """Also: text prompts and no vLLM-only fields, for servers other than vLLM."""
    options = loadtest.LoadOptions(max_requests=4, prompt_mode="text", vllm_extras=False)
    result = loadtest.run(server["url"], _mix(30), options)
    assert result.summary.requests.planned == 4
    assert result.summary.requests.completed == 4
    assert server["state"]["posts"] == 4


def test_loadtest_refused_endpoint_exits_3(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = _spec(tmp_path)
    out = tmp_path / "lt.json"
    code = main(
        [
            "loadtest",
            "--endpoint",
            f"http://127.0.0.1:{port}",
            "--spec",
            str(spec),
            "--out",
            str(out),
        ]
    )
    assert code == 3
    kept = json.loads(out.read_text())
    assert kept["complete"] is False and "ConnectError" in kept["error"]


def test_loadtest_timeout_keeps_what_was_measured(server: dict[str, Any], tmp_path: Path) -> None:
    server["state"]["hang_after"] = 3
    out = tmp_path / "lt.json"
    with pytest.raises(OutsideFailure) as info:
        loadtest.run(
            server["url"],
            _mix(6),
            loadtest.LoadOptions(duration_s=20, request_timeout_s=1.5),
            out=out,
        )
    assert "stopped" in str(info.value)
    kept = json.loads(out.read_text())
    assert kept["complete"] is False
    done = [r for r in kept["requests"] if r["error"] is None and r["done_s"] is not None]
    assert len(done) >= 3  # the first three were answered before the server hung
    assert all(r["ttft_s"] is not None for r in done)


def test_loadtest_cli_writes_dist(server: dict[str, Any], tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    code = main(
        [
            "loadtest",
            "--endpoint",
            server["url"] + "/v1",
            "--spec",
            str(spec),
            "--dist",
            str(tmp_path / "dist"),
        ]
    )
    assert code == 0
    result = json.loads((tmp_path / "dist" / "lt" / "loadtest.json").read_text())
    assert result["summary"]["requests"]["completed"] == 5


def test_parse_metrics_and_delta() -> None:
    before = loadtest.parse_metrics(
        '# HELP x\nvllm:a_total{m="x y"} 3\nvllm:g 5\nvllm:h_bucket{le="+Inf"} 1\n'
    )
    after = loadtest.parse_metrics('vllm:a_total{m="x y"} 10\nvllm:g 7\nvllm:h_bucket{le="+Inf"} 4')
    assert before['vllm:a_total{m="x y"}'] == 3
    assert loadtest.metrics_delta(before, after) == {
        'vllm:a_total{m="x y"}': 7,
        'vllm:h_bucket{le="+Inf"}': 3,
    }


def _spec(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    spec = tmp_path / "lt.toml"
    spec.write_text(
        spec_head("lt")
        + """
[conformance.request_mix]
requests = 5
seed = 1
arrival = {process = "poisson", rate = 20.0}
prompt_tokens = {dist = "fixed", value = 100}
output_tokens = {dist = "fixed", value = 8}
"""
    )
    return spec


def test_the_request_body_is_the_json_it_always_was() -> None:
    record = loadtest.RequestRecord(index=0, arrival_s=0.0, prompt_tokens=2, max_tokens=3)
    body = loadtest._body(record, "m", loadtest.LoadOptions())
    assert json.dumps(body) == (
        '{"model": "m", "prompt": [100, 100], "max_tokens": 3, "temperature": 0.0, '
        '"stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true, '
        '"min_tokens": 3}'
    )
    text = loadtest._body(record, "m", loadtest.LoadOptions(prompt_mode="text", vllm_extras=False))
    assert list(text) == list(body)[:6] and text["prompt"] == "hello hello"
