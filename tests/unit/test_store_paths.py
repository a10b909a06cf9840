"""What a store may name: pairing ids are sha256s, store paths stay inside the store (a
folder's links too), JSON from a store is bounded in depth; each known-good value is
accepted and each known-bad one refused as bad input naming it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.storeindex import check_pid, store_path
from vllm_plugin_release.edges import store as st

GOOD_PATHS = [
    "index.json",
    "pairings/" + "a" * 64 + ".intoto.jsonl",
    "wheels/vllm-0.26.0+empty-cp311-cp311-linux_x86_64.whl",
    "lkg/tt-nightly.json",
]
BAD_PATHS = [
    "",
    "/etc/passwd",
    "file:///etc/passwd",
    "http://other.example/x",
    "//other.example/x",
    "../index.json",
    "pairings/../../x",
    "pairings/./x",
    "pairings//x",
    "pairings\\x",
    "%2e%2e/x",
    ".lock",
    "a b",
    "x\n",
    "ünicode",
    5,
    None,
    ["index.json"],
]


@pytest.mark.parametrize("path", GOOD_PATHS)
def test_store_paths_inside_the_store_are_accepted(path: str) -> None:
    assert store_path(path, "index.json") == path


@pytest.mark.parametrize("path", BAD_PATHS, ids=[repr(p) for p in BAD_PATHS])
def test_store_paths_that_leave_the_store_are_refused(path: object) -> None:
    with pytest.raises(BadInput, match=r"index\.json: .* not a path inside the store"):
        store_path(path, "index.json")


def test_pairing_ids_are_sha256s() -> None:
    assert check_pid("ab" * 32, "x") == "ab" * 32
    for bad in ("AB" * 32, "ab" * 31, "../" + "a" * 61, "a" * 65, 7, None):
        with pytest.raises(BadInput, match="not a sha256"):
            check_pid(bad, "index.json")


def test_a_folder_store_reads_no_link_that_leaves_it(tmp_path: Path) -> None:
    secret = tmp_path / "secret.key"
    secret.write_text("secret")
    root = tmp_path / "store"
    (root / "pairings").mkdir(parents=True)
    (root / "pairings" / "x.json").symlink_to(secret)
    (root / "pairings" / "y.json").write_text("{}")
    store = st.DirStore(root)
    assert store.read_bytes("pairings/y.json") == b"{}"
    with pytest.raises(BadInput, match="leads outside the store"):
        store.read_bytes("pairings/x.json")
    with pytest.raises(BadInput, match="not a path inside the store"):
        store.read_bytes(str(secret))
    with pytest.raises(st.Missing):
        store.read_bytes("pairings/z.json")
    (root / "big.json").write_bytes(b" " * 2048)
    with pytest.raises(bounded.TooLarge, match="larger than 1024 bytes"):
        store.read_bytes("big.json", 1024)


def test_an_http_store_reads_no_local_file_or_other_origin() -> None:
    store = st.open_store("http://127.0.0.1:9/store/")
    for bad in ("file:///etc/passwd", "http://other.example/x", "/etc/passwd", "../x"):
        with pytest.raises(BadInput, match="not a path inside the store"):
            store.read_bytes(bad)


@pytest.mark.parametrize("url", ["http://[::1/", "http://host:port/", "http:///x", "http://h/?q"])
def test_a_store_url_that_does_not_parse_is_bad_input(url: str) -> None:
    with pytest.raises(BadInput, match="--store"):
        st.open_store(url)


def test_json_from_a_store_is_bounded_in_depth() -> None:
    deepest = bounded.loads(b"[" * 64 + b"]" * 64)
    for _ in range(63):
        deepest = deepest[0]
    assert deepest == []
    with pytest.raises(bounded.TooDeep):
        bounded.loads(b"[" * 65 + b"]" * 65)
    with pytest.raises(bounded.TooDeep):
        bounded.loads(b'{"a":' * 100 + b"1" + b"}" * 100)
    with pytest.raises(ValueError):
        bounded.loads(b'"\xff"')


def test_a_file_that_is_not_a_regular_file_is_bad_input(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="not a regular file"):
        bounded.read_file(fifo, 100, "index")
    with pytest.raises(BadInput, match="is a folder"):
        bounded.read_file(tmp_path, 100, "index")
    with pytest.raises(BadInput, match="not a regular file"):
        bounded.read_file(Path("/dev/zero"), 100, "index")


def test_files_are_written_0644_whatever_the_umask(tmp_path: Path) -> None:
    """Under umask 000 a written file (a store's index, head, ledger) is still 0644, never
    writable by others; the consumer's trust record is 0600."""
    import subprocess
    import sys

    probe = (
        "import os, sys; os.umask(0)\n"
        "from pathlib import Path\n"
        "from vllm_plugin_release.core.cache import atomic_write_bytes\n"
        "atomic_write_bytes(Path(sys.argv[1]), b'x')\n"
    )
    target = tmp_path / "index.json"
    subprocess.run([sys.executable, "-c", probe, str(target)], check=True)
    assert target.stat().st_mode & 0o777 == 0o644
