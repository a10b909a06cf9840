"""Issue target: `vpr build-core` in the container, image present, cold <= 1.5x the local
cold build in the same run; the container's warm re-run <= 0.1x its cold build.

(a) local cold: `vpr build-core --force` (sdist and build env cached);
(b) container cold: `vpr build-core --force --backend docker` (the pinned image
    present and its build env cached: two builds, each in its own container);
(c) container warm: `vpr build-core --backend docker` with nothing changed.
Needs a container engine (DOCKER_HOST; .ci/run starts one) and the image
(`vpr build-image`); without them it says so and measures nothing.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from benchmarks.common import REPO, console, report, timed, vpr

SPEC = str(REPO / "buildspec" / "reference.toml")


def main(repeats: int = 3) -> dict:
    from vllm_plugin_release.core.errors import OutsideFailure
    from vllm_plugin_release.edges.container import connect

    try:
        connect()
    except OutsideFailure as exc:
        console.print(f"  skipped: {exc.message}")
        return {"skipped": exc.message}
    dist = Path(tempfile.mkdtemp(prefix="bench-dist-"))
    docker = ("--backend", "docker")
    vpr("build-image", "--spec", SPEC)  # present, and the pinned digest
    vpr("build-core", "--spec", SPEC, "--dist", str(dist))  # every input cached
    vpr("build-core", "--spec", SPEC, "--dist", str(dist), *docker)
    rows = {
        "(a) local build-core cold": timed(
            lambda: vpr("build-core", "--spec", SPEC, "--dist", str(dist), "--force"), repeats
        ),
        "(b) container build-core cold": timed(
            lambda: vpr("build-core", "--spec", SPEC, "--dist", str(dist), "--force", *docker),
            repeats,
        ),
        "(c) container build-core warm": timed(
            lambda: vpr("build-core", "--spec", SPEC, "--dist", str(dist), *docker), repeats
        ),
    }
    shutil.rmtree(dist, ignore_errors=True)
    return report(
        "build-core in the pinned container vs local",
        rows,
        [
            (
                "container cold / local cold",
                "(b) container build-core cold",
                "(a) local build-core cold",
                1.5,
            ),
            (
                "container warm / cold",
                "(c) container build-core warm",
                "(b) container build-core cold",
                0.1,
            ),
        ],
    )


if __name__ == "__main__":
    main()
