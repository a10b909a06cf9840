"""The build commands, run by either runner with the paths it passes in; nothing here starts
a process."""

from __future__ import annotations

from collections.abc import Mapping

from vllm_plugin_release.edges.runner import Command

# Optional Rust extensions of vLLM are not part of the empty target; a shim that
# refuses to run makes that explicit and keeps the wheel the same on machines
# with and without a Rust toolchain.
RUST_SHIM = """#!/bin/sh
echo "vpr: $(basename "$0") is disabled in this build: vLLM's optional Rust extensions are \
not built for VLLM_TARGET_DEVICE=empty" >&2
exit 1
"""
RUST_TOOLS = ("cargo", "rustc")


# The build environment's bytecode, compiled once after the install: builds run with
# PYTHONDONTWRITEBYTECODE and vLLM's setup.py imports torch. Files go out largest first to
# whichever process is free, so none goes on alone at the end; each pyc depends on its file
# only, so the order changes no byte. Test packages' bytecode is almost never read.
COMPILE_BYTECODE = """\
import mmap, os, py_compile, re, sys
top, skip = sys.argv[1], re.compile(sys.argv[2])
paths = []
for folder, subfolders, names in os.walk(top):
    subfolders[:] = [d for d in subfolders if d != "__pycache__"]
    for name in names:
        path = os.path.join(folder, name)
        if name.endswith(".py") and not skip.search(path):
            paths.append((os.path.getsize(path), path))
paths = [path for _, path in sorted(paths, key=lambda p: (-p[0], p[1]))]
counter = mmap.mmap(-1, 8)  # shared with the forked processes
token, give_back = os.pipe()
os.write(give_back, b".")  # one token: whoever holds it moves the counter
def take():
    os.read(token, 1)
    number = int.from_bytes(counter[:8], "little")
    counter[:8] = (number + 1).to_bytes(8, "little")
    os.write(give_back, b".")
    return number
def run():
    while (number := take()) < len(paths):
        try:
            py_compile.compile(
                paths[number],
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP,
            )
        except (py_compile.PyCompileError, OSError, ValueError):
            pass
n = max(1, len(os.sched_getaffinity(0)))
children = []
for i in range(1, n):
    pid = os.fork()
    if pid == 0:
        try:
            run()
        finally:
            os._exit(0)
    children.append(pid)
run()
for pid in children:
    os.waitpid(pid, 0)
"""
NOT_COMPILED = r"/(tests?|testing)/"


def venv_commands(
    *, uv: str, python: str, venv: str, lock: str, find_links: list[str], env: dict[str, str]
) -> list[Command]:
    """Create a venv, install a hash-locked file into it, compile its bytecode; nothing else."""
    links: list[str] = []
    for link in find_links:
        links += ["--find-links", link]
    return [
        Command(
            label=f"create build environment ({python})",
            argv=(uv, "venv", "--quiet", "--no-python-downloads", "--python", python, venv),
            env=env,
        ),
        Command(
            label="install build requirements (hashes required)",
            argv=(
                uv,
                "pip",
                "install",
                "--python",
                f"{venv}/bin/python",
                "--require-hashes",
                "--no-deps",
                "--index-strategy",
                "unsafe-best-match",
                "-r",
                lock,
                *links,
            ),
            env=env,
            downloads=True,  # uv's "Downloading NAME (SIZE)" lines, said as they come
        ),
        Command(
            label="compile the build environment's bytecode",
            argv=(f"{venv}/bin/python", "-c", COMPILE_BYTECODE, f"{venv}/lib", NOT_COMPILED),
            env=env,
            network=False,
        ),
    ]


def build_env(
    *,
    base: dict[str, str],
    venv: str,
    shim: str,
    target_device: str | None,
    source_date_epoch: int,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A wheel build's environment: only what matters, all recorded; `extra` (the spec's
    `[plugin] build_env`) never replaces what is set here."""
    env = {**base, **(extra or {})}
    env.update(
        {
            "PATH": f"{shim}:{venv}/bin:{base.get('PATH', '/usr/bin:/bin')}",
            "SOURCE_DATE_EPOCH": str(source_date_epoch),
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "TZ": "UTC",
            "LC_ALL": "C.UTF-8",
            "LANG": "C.UTF-8",
            "CARGO": f"{shim}/cargo",
            "PIP_NO_INDEX": "1",
        }
    )
    if target_device:
        env["VLLM_TARGET_DEVICE"] = target_device
    return env


RECORDED_ENV = ("VLLM_TARGET_DEVICE", "SOURCE_DATE_EPOCH", "PYTHONHASHSEED", "TZ", "LC_ALL")


def wheel_command(*, venv: str, src: str, outdir: str, env: dict[str, str]) -> Command:
    """`python -m build --wheel --no-isolation` of a source tree, with no network."""
    build = ("-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check")
    argv = (f"{venv}/bin/python", *build, "--outdir", outdir, src)
    return Command(label="build wheel", argv=argv, env=env, cwd=src, network=False)
