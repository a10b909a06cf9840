"""`vpr lock` against real uv resolutions of small wheels made here (find-links only,
UV_NO_INDEX): an [env] override that a locked package's own requirement rules out is
refused naming both, a cap resolves it, and the lock names the file it installs for a
package it records (torch, the runtime)."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.lockfile import LockRequest, check_lock, locked_file
from vllm_plugin_release.edges.uv import compile_lock, wheel_fits


def _wheel(folder: Path, name: str, version: str, requires: list[str], tag: str = "py3-none-any"):
    dist = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{dist}-{tag}.whl"
    meta = "\n".join(
        ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
        + [f"Requires-Dist: {r}" for r in requires]
    )
    files = {
        f"{name.replace('-', '_')}/__init__.py": "",
        f"{dist}.dist-info/METADATA": meta + "\n",
        f"{dist}.dist-info/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
        zf.writestr(f"{dist}.dist-info/RECORD", "")
    return path


@pytest.fixture
def links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "links"
    folder.mkdir()
    _wheel(folder, "vprt-numb", "1.0", [])
    _wheel(folder, "vprt-numb", "2.0", [])
    _wheel(folder, "vprt-dtypes", "0.5", ["vprt-numb>=1"])
    _wheel(folder, "vprt-dtypes", "0.7", ["vprt-numb>=2"])  # the newest needs numb 2
    monkeypatch.setenv("UV_NO_INDEX", "1")  # these wheels only: no index is asked
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("HOME", str(tmp_path))
    return folder


def _request(**extra: object) -> LockRequest:
    return LockRequest(
        name="env-x",
        requirements=("vprt-dtypes",),
        python="3.11",
        **extra,  # type: ignore[arg-type]
    )


def test_an_override_a_locked_package_rules_out_is_refused_naming_both(
    links: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "env-x.txt"
    with pytest.raises(BadInput) as err:
        compile_lock(_request(overrides=("vprt-numb<2",)), dest, [str(links)])
    assert err.value.exit_code == 2
    text = err.value.message
    assert "'vprt-numb<2' (locked vprt-numb==1.0)" in text
    assert "vprt-dtypes" in text and "vprt-numb>=2" in text  # uv's own explanation
    assert "caps" in (err.value.hint or "")
    assert not dest.exists()  # nothing half-written
    assert not list(tmp_path.glob(".env-x.txt.*"))  # no scratch left


def test_a_cap_on_the_package_that_needs_more_resolves_it(links: Path, tmp_path: Path) -> None:
    dest = tmp_path / "env-x.txt"
    request = _request(overrides=("vprt-numb<2",), caps=("vprt-dtypes<0.6",))
    text = compile_lock(request, dest, [str(links)])
    assert "vprt-dtypes==0.5" in text and "vprt-numb==1.0" in text
    assert "# caps (uv --constraint): vprt-dtypes<0.6" in text
    check_lock(dest, request)
    # the caps are an input: a lock made without them is stale for a request with them
    plain = tmp_path / "plain.txt"
    compile_lock(_request(), plain, [str(links)])
    with pytest.raises(BadInput, match="stale"):
        check_lock(plain, request)


def test_an_override_nothing_contradicts_is_kept(links: Path, tmp_path: Path) -> None:
    text = compile_lock(_request(overrides=("vprt-numb==2.0",)), tmp_path / "l.txt", [str(links)])
    assert "vprt-numb==2.0" in text and "vprt-dtypes==0.7" in text


def test_the_lock_names_the_file_it_installs_for_this_python(links: Path, tmp_path: Path) -> None:
    wanted = _wheel(links, "torch", "9.9.9", [], tag="cp311-cp311-manylinux_2_28_x86_64")
    _wheel(links, "torch", "9.9.9", [], tag="cp310-cp310-manylinux_2_28_x86_64")
    request = LockRequest(name="build-x", requirements=("torch==9.9.9",), python="3.11")
    text = compile_lock(request, tmp_path / "b.txt", [str(links)])
    found = locked_file(text, "torch")
    assert found is not None
    assert found.filename == wanted.name
    assert found.sha256 == hashlib.sha256(wanted.read_bytes()).hexdigest()
    assert found.size == wanted.stat().st_size and found.source == str(links)
    assert found.record("9.9.9")["local"] is None
    assert locked_file(text, "ttnn") is None


@pytest.mark.parametrize(
    ("filename", "python", "platform", "fits"),
    [
        ("t-1-cp310-cp310-manylinux_2_28_x86_64.whl", "3.10", "x86_64-manylinux_2_34", True),
        ("t-1-cp310-cp310-manylinux_2_34_x86_64.whl", "3.10", "x86_64-manylinux_2_28", False),
        ("t-1-cp311-cp311-manylinux_2_28_x86_64.whl", "3.10", "x86_64-manylinux_2_34", False),
        ("t-1-cp310-cp310-manylinux_2_28_aarch64.whl", "3.10", "x86_64-manylinux_2_34", False),
        ("t-1-cp38-abi3-manylinux2014_x86_64.whl", "3.12", "x86_64-manylinux_2_28", True),
    ],
)
def test_wheel_fits_the_python_and_the_glibc(
    filename: str, python: str, platform: str, fits: bool
) -> None:
    assert (wheel_fits(filename, python, platform) is not None) is fits


def test_the_index_build_is_pinned_so_a_local_build_cannot_take_its_place(
    links: Path, tmp_path: Path
) -> None:
    """`[build] torch = "9.9.9"` is the index's build: the lock pins it `===`, so the install
    takes that file even where find-links also offer `9.9.9+cpu` (with `==`, uv takes the
    +cpu file, then fails its hash: what happened to spyre's cp311 torch here)."""
    import subprocess

    from vllm_plugin_release.edges.uv import uv_bin

    plain = _wheel(links, "vprt-torch", "9.9.9", [])
    _wheel(links, "vprt-torch", "9.9.9+cpu", [])
    request = LockRequest(name="b", requirements=("vprt-torch===9.9.9",), python="3.11")
    lock = tmp_path / "b.txt"
    text = compile_lock(request, lock, [str(links)])
    assert "\nvprt-torch===9.9.9 \\" in text
    assert hashlib.sha256(plain.read_bytes()).hexdigest() in text
    check_lock(lock, request)

    def install(path: Path) -> subprocess.CompletedProcess[str]:
        venv = tmp_path / f"venv-{path.stem}"
        subprocess.run([uv_bin(), "venv", "-q", str(venv)], check=True)
        return subprocess.run(
            [uv_bin(), "pip", "install", "--python", str(venv / "bin" / "python"),
             "--require-hashes", "--no-deps", "--find-links", str(links), "-r", str(path)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip

    done = install(lock)
    assert done.returncode == 0, done.stderr
    assert "+ vprt-torch==9.9.9\n" in done.stderr
    # known-bad: the same lock written with uv's `==` takes the local build and fails
    loose = tmp_path / "loose.txt"
    loose.write_text(text.replace("vprt-torch===9.9.9", "vprt-torch==9.9.9"))
    done = install(loose)
    assert done.returncode != 0 and "9.9.9+cpu" in done.stderr
