"""What uv downloads, said while it installs (`edges/uv`): from uv's own lines in the
install's log, as a real `uv pip install` writes them."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from vllm_plugin_release.core import progress
from vllm_plugin_release.edges import uv

UV_OUTPUT = """Using Python 3.10.13 environment at: /tmp/env
Resolved 3 packages in 1.29s
Downloading torch (502.2MiB)
Downloading nvidia-cublas (403.5MiB)
Downloading numpy (17.4MiB)
 Downloaded numpy
 Downloaded nvidia-cublas
Prepared 3 packages in 40.5s
"""


def test_uv_lines_give_the_files_their_sizes_and_what_is_done() -> None:
    seen = uv.parse_downloads(UV_OUTPUT)
    assert seen.sizes == {
        "torch": int(502.2 * (1 << 20)),
        "nvidia-cublas": int(403.5 * (1 << 20)),
        "numpy": int(17.4 * (1 << 20)),
    }
    assert seen.done == {"numpy", "nvidia-cublas"}
    line = uv.announce("install", seen)
    assert line.startswith("install: downloading 967.9 MB in 3 files into uv's cache")
    assert "torch 526.6 MB" in line
    # a warm cache: uv names nothing, nothing is said
    assert (
        uv.parse_downloads("Resolved 3 packages in 10ms\nInstalled 3 packages in 5ms\n").sizes == {}
    )


@pytest.mark.timeout(60)
def test_watching_says_it_as_it_happens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    monkeypatch.setattr(progress, "info", said.append)
    monkeypatch.setattr(uv, "POLL_SECONDS", 0.01)
    log = tmp_path / "env.log"
    log.write_text("$ uv pip install ...\n")
    start = log.stat().st_size
    written = threading.Event()

    def install() -> None:  # what uv writes, in its order
        with log.open("a") as out:
            for line in UV_OUTPUT.splitlines(keepends=True):
                out.write(line)
                out.flush()
        written.set()

    with uv.watching("install", log, start):
        threading.Thread(target=install).start()
        written.wait()
        while not any("downloading" in s for s in said):  # the event, said while it runs;
            time.sleep(0.01)  # a hang is pytest-timeout's (this test's bound)
    assert any(s.startswith("install: downloading") for s in said)
    assert said[-1] == "install: downloaded 441.3 MB in 2 of 3 files"
