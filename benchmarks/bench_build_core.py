"""Targets: `vpr build-core` cold <= 1.0x a bare build; warm <= 0.02x cold.

(a) bare: `VLLM_TARGET_DEVICE=empty python -m build --wheel --no-isolation` of the
    same extracted sdist, in the same cached build environment (one build), in a
    temporary folder (/tmp) as one would run it;
(a2) the same bare build in the folder where vpr's local builds make their scratch
    (edges/settings.build_scratch_root: /dev/shm here), so that the ratio of the double
    build to one build is also shown on the same filesystem;
(b) cold: `vpr build-core --force` with the sdist and build env already cached
    (two builds in parallel + comparison + record);
(c) warm: `vpr build-core` with nothing changed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from benchmarks.common import REPO, report, run, timed, vpr

SPEC = str(REPO / "buildspec" / "reference.toml")


def main(repeats: int = 5) -> dict:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.cache import Cache, sha256_file
    from vllm_plugin_release.edges.fetch import Fetcher, source_tree
    from vllm_plugin_release.edges.runner import LocalRunner
    from vllm_plugin_release.edges.settings import build_scratch_root
    from vllm_plugin_release.stages.requests import build_request
    from vllm_plugin_release.stages.wheelbuild import ensure_build_env

    spec = load_spec(SPEC)
    cache = Cache(REPO / ".vpr")
    tree = source_tree(spec, Fetcher(cache))
    lock = spec.resolve(spec.build.constraints)
    build_request(spec, tree)
    venv = ensure_build_env(spec, lock, sha256_file(lock), cache, LocalRunner("off"))
    dist = Path(tempfile.mkdtemp(prefix="bench-dist-"))
    vpr("build-core", "--spec", SPEC, "--dist", str(dist))  # make sure every input is cached

    def bare(where: Path | None = None) -> None:
        with tempfile.TemporaryDirectory(dir=where) as tmp:
            src = Path(tmp) / tree.name
            shutil.copytree(tree, src, symlinks=True)
            env = {
                **os.environ,
                "VLLM_TARGET_DEVICE": "empty",
                "SOURCE_DATE_EPOCH": str(spec.core.source_date_epoch),
            }
            run(
                str(venv / "bin" / "python"),
                "-m",
                "build",
                "--wheel",
                "--no-isolation",
                "--skip-dependency-check",
                "--outdir",
                f"{tmp}/out",
                str(src),
                env=env,
            )

    memory = build_scratch_root()
    rows = {
        "(a) bare python -m build": timed(bare, repeats),
        "(a2) the same, in vpr's build scratch": timed(lambda: bare(memory), repeats),
        "(b) vpr build-core cold": timed(
            lambda: vpr("build-core", "--spec", SPEC, "--dist", str(dist), "--force"), repeats
        ),
        "(c) vpr build-core warm": timed(
            lambda: vpr("build-core", "--spec", SPEC, "--dist", str(dist)), repeats
        ),
    }
    shutil.rmtree(dist, ignore_errors=True)
    return report(
        "build-core (vLLM 0.26.0, empty target)",
        rows,
        [
            ("cold / bare", "(b) vpr build-core cold", "(a) bare python -m build", 1.0),
            (
                "cold / bare in the same scratch",
                "(b) vpr build-core cold",
                "(a2) the same, in vpr's build scratch",
                1.0,
            ),
            ("warm / cold", "(c) vpr build-core warm", "(b) vpr build-core cold", 0.02),
        ],
    )


if __name__ == "__main__":
    main()
