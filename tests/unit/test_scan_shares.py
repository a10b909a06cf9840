"""The isolation scan shared out over forked processes gives the very report of one
process (hits, skips, counts, allowlist use), and a big file is read whole unless its
first block shows it is binary."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from vllm_plugin_release.conform.lib import symbols
from vllm_plugin_release.conform.lib.symbols import _HEAD, FILES_PER_FORK, scan_tree, scan_wheel

ALLOW = [
    {"path": "pkg/allowed_*.py", "symbol": "ttnn", "reason": "known"},
    {"path": "pkg/gone.py", "symbol": "*", "reason": "stale"},
]


def _tree(root: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for i in range(3 * FILES_PER_FORK):
        body = f"x_{i} = {i}\n"
        if i % 7 == 0:
            body += "import ttnn\n"
        if i % 11 == 0:
            body += "# uses tt_metal here\n"
        files[f"pkg/m{i:04d}.py"] = body.encode()
    files["pkg/allowed_1.py"] = b"import ttnn\n"
    files["pkg/image.png"] = b"\x89PNG\x00 ttnn \x00"
    files["pkg/latin.txt"] = "caf\xe9 ttnn".encode("latin-1")
    files["docs/guide.md"] = "TTNN runs on Tenstorrent cards — café\n".encode()
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    os.symlink("m0000.py", root / "pkg" / "link.py")
    return files


def _json(report: symbols.ScanReport) -> str:
    return json.dumps({**report.to_json(), "seconds": 0}, sort_keys=True)


@pytest.fixture
def shares_seen(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many shares each scan was cut into (the real forked_map runs them)."""
    seen: list[int] = []
    real = symbols.forked_map

    def spy(fn, shares):
        seen.append(len(shares))
        return real(fn, shares)

    monkeypatch.setattr(symbols, "forked_map", spy)
    return seen


def test_a_tree_shared_out_gives_the_report_of_one_process(
    tmp_path: Path, shares_seen: list[int]
) -> None:
    _tree(tmp_path)
    one = scan_tree(tmp_path, ["ttnn", "tt_metal", "tenstorrent"], ALLOW)
    three = scan_tree(tmp_path, ["ttnn", "tt_metal", "tenstorrent"], ALLOW, workers=3)
    assert shares_seen == [1, 3]  # it was really cut in three (forked) the second time
    assert _json(three) == _json(one)
    assert three.counts["import"] == len(range(0, 3 * FILES_PER_FORK, 7))
    assert three.allowed == 1 and [e.path for e in three.unused_allowlist] == ["pkg/gone.py"]
    assert three.skipped_counts == {"binary": 1, "undecodable": 1, "symlink": 1}


def test_a_small_tree_is_not_worth_a_fork(tmp_path: Path, shares_seen: list[int]) -> None:
    (tmp_path / "a.py").write_text("import ttnn\n")
    scan_tree(tmp_path, ["ttnn"], workers=8)
    assert shares_seen == [1]


def test_a_wheel_shared_out_gives_the_report_of_one_process(
    tmp_path: Path, shares_seen: list[int]
) -> None:
    files = _tree(tmp_path / "src")
    wheel = tmp_path / "x-1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for rel, data in files.items():
            zf.writestr(rel, data)
    one = scan_wheel(wheel, ["ttnn", "tt_metal"], ALLOW)
    two = scan_wheel(wheel, ["ttnn", "tt_metal"], ALLOW, workers=2)
    assert shares_seen == [1, 2]
    assert _json(two) == _json(one)
    # a wheel's binary members are read and their symbols noted
    assert {s.path: s.symbols for s in two.skipped}["pkg/image.png"] == ("ttnn",)


def test_a_damaged_member_read_in_a_forked_share_is_bad_input(tmp_path: Path) -> None:
    wheel = tmp_path / "x-1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for i in range(2 * FILES_PER_FORK):
            zf.writestr(f"pkg/m{i:04d}.py", f"x = {i}\n" * 50)
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as zf:
        last = zf.infolist()[-1]  # in the second share (dealt round-robin)
    at = last.header_offset + 30 + len(last.filename) + 5
    data[at : at + 8] = b"\xff" * 8  # its compressed bytes, not its headers
    wheel.write_bytes(bytes(data))
    with pytest.raises(symbols.BadInput, match=r"member pkg/m\d+\.py cannot be read"):
        scan_wheel(wheel, ["ttnn"], workers=2)


def test_a_big_text_file_is_read_whole(tmp_path: Path) -> None:
    # the hit is past the first block: reading only that block would miss it
    (tmp_path / "big.py").write_bytes(b"# filler\n" * (2 * _HEAD // 9) + b"import ttnn\n")
    report = scan_tree(tmp_path, ["ttnn"])
    assert [h.line for h in report.hits] == [2 * _HEAD // 9 + 1]
    assert report.bytes_scanned == (tmp_path / "big.py").stat().st_size


def test_a_big_binary_file_is_skipped_on_its_first_block(tmp_path: Path) -> None:
    (tmp_path / "img.png").write_bytes(b"\x89PNG\x00" + b"import ttnn\n" * _HEAD)
    (tmp_path / "late.bin").write_bytes(b"import ttnn\n" * (_HEAD // 6) + b"\x00")
    assert len(symbols._read(str(tmp_path / "img.png"))) == _HEAD + 1
    report = scan_tree(tmp_path, ["ttnn"])
    # a NUL after the first block still makes a binary file: read whole, then skipped
    assert report.hits == [] and report.skipped_counts == {"binary": 2}
