"""Target: creating the pairing environment from a warm cache, with every check
(hashes, the in-env checks), <= 2.0x the plain `uv pip install` commands of the TT
plugin's own installer. The install alone is shown next to it.

(a) plain: `uv venv` + `uv pip install --override OVERRIDES -r common.txt torch` (the
    installer's requirement list, unlocked, resolved on every run) + vLLM wheel --no-deps
    + plugin wheel --no-deps;
(b) vpr env: `vpr env --spec buildspec/tt.toml` with its environment removed (uv's
    download cache warm): hash-locked install + wheel checks + the in-env checks, as when
    the plugin or core changes: the bytecode kept from the last environment of this lock
    is put in first (.vpr/bytecode, edges/envrun.py);
(c) vpr env install only: the same install commands vpr runs, without the in-env checks;
(d) vpr env, first environment of its lock: (b) with no kept bytecode (the in-env
    checks' imports compile every module they load), shown next to it.
The TT plugin checkout comes from VPR_TT_PLUGIN_CHECKOUT (a local git clone); without
it the benchmark uses buildspec/reference.toml and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from benchmarks.common import REPO, console, report, run, timed, vpr


def main(repeats: int = 3) -> dict:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.edges import interpreters
    from vllm_plugin_release.edges.fetch import Fetcher, source_tree
    from vllm_plugin_release.edges.uv import find_link_args, uv_bin

    checkout = os.environ.get("VPR_TT_PLUGIN_CHECKOUT")
    name = "tt" if checkout else "reference"
    spec_file = str(REPO / "buildspec" / f"{name}.toml")
    extra = ["--plugin-source", checkout] if checkout else []
    if not checkout:
        console.print("[yellow]VPR_TT_PLUGIN_CHECKOUT unset: benchmarking the reference pairing")
    spec = load_spec(spec_file)
    cache = Cache(REPO / ".vpr")
    dist = Path(tempfile.mkdtemp(prefix="bench-env-"))
    vpr("build-core", "--spec", spec_file, "--dist", str(dist))
    common = ["--spec", spec_file, "--dist", str(dist), *extra]
    vpr("build-plugin", *common)
    env_json = dist / spec.name / "env.json"

    def env_made() -> None:
        """`vpr env`: exit 0, or 1 when every failed check is the plugin's own finding (the
        pinned vllm-tt-plugin has a module that does not import with this vLLM): the
        environment was made and every check ran, which is what is timed."""
        env_json.unlink(missing_ok=True)
        vpr("env", *common, ok=(0, 1))
        checks = json.loads(env_json.read_text())["checks"]
        other = [c["name"] for c in checks if c["status"] == "fail" and not c.get("finding")]
        if other:
            raise SystemExit(f"vpr env: checks failed that are no finding: {other}")

    env_made()  # warms uv's cache and tells us where the env lives
    record = json.loads(env_json.read_text())
    env_dir = Path(record["python"]).parent.parent
    core_whl = dist / spec.name / record["core_wheel"]["filename"]
    plugin_whl = dist / spec.name / record["plugin_wheel"]["filename"]
    tree = source_tree(spec, Fetcher(cache))
    uv = uv_bin()
    # the spec's CPython as vpr finds it (uv alone would download one: pyenv's shims fail)
    python = interpreters.find(spec.build.python, uv=uv).path
    links = find_link_args(tuple(spec.build.find_links))
    lock = spec.resolve(spec.env_constraints)

    def plain() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            venv = Path(tmp) / "venv"
            overrides = Path(tmp) / "overrides.txt"
            overrides.write_text("\n".join(spec.env.overrides) + "\n")
            run(uv, "venv", "--quiet", "--python", python, str(venv))
            py = str(venv / "bin" / "python")
            run(
                uv,
                "pip",
                "install",
                "--quiet",
                "--python",
                py,
                "--override",
                str(overrides),
                "-r",
                str(tree / "requirements" / "common.txt"),
                f"torch=={spec.build.torch}",
                "--index-strategy",
                "unsafe-best-match",
                *links,
            )
            run(uv, "pip", "install", "--quiet", "--python", py, "--no-deps", str(core_whl))
            run(uv, "pip", "install", "--quiet", "--python", py, "--no-deps", str(plugin_whl))

    def vpr_env() -> None:
        shutil.rmtree(env_dir, ignore_errors=True)
        env_made()

    def first_of_lock() -> None:
        shutil.rmtree(env_dir.parent.parent / "bytecode", ignore_errors=True)  # .vpr/bytecode
        vpr_env()

    def install_only() -> None:
        from vllm_plugin_release.stages.pairing_env import install_steps

        with tempfile.TemporaryDirectory() as tmp:
            for _, argv in install_steps(
                uv, python, Path(tmp) / "venv", lock, links, [core_whl, plugin_whl]
            ):
                run(*argv)

    rows = {
        "(a) plain uv pip install (installer)": timed(plain, repeats),
        "(b) vpr env (hashes + checks)": timed(vpr_env, repeats),
        "(c) vpr env install only (hashes)": timed(install_only, repeats),
        "(d) vpr env, first env of its lock": timed(first_of_lock, repeats),
    }
    vpr_env()  # leaves kept bytecode behind, as a run of (b) found it
    shutil.rmtree(dist, ignore_errors=True)
    return report(
        f"pairing environment ({name}), warm uv cache",
        rows,
        [
            (
                "vpr env / plain",
                "(b) vpr env (hashes + checks)",
                "(a) plain uv pip install (installer)",
                2.0,
            ),
            (
                "first env of its lock / plain",
                "(d) vpr env, first env of its lock",
                "(a) plain uv pip install (installer)",
                2.0,
            ),
            (
                "install only / plain",
                "(c) vpr env install only (hashes)",
                "(a) plain uv pip install (installer)",
                1.0,
            ),
        ],
    )


if __name__ == "__main__":
    main()
