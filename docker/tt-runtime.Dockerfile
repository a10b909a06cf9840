# TT-Metal runtime image for the self-hosted hardware runner (`nox -s conform-hardware`).
#
# ttnn (TT-Metal's Python package) comes from PyPI, pinned by version and sha256 in
# docker/tt-runtime-requirements.txt. ttnn 0.81.1 ships wheels for CPython 3.10 and 3.12
# only (manylinux_2_34; bookworm's glibc 2.36 is new enough), so the base is Python 3.10.
# The runtime lives in its own venv, /opt/tt-runtime, which VPR_RUNTIME_ENV names: the
# hardware session builds the pairing environment on top of it (`vpr env --runtime-env`).
#
# Run it with the device and hugepages of the host, e.g.
#   docker run --device /dev/tenstorrent -v /dev/hugepages-1G:/dev/hugepages-1G \
#     -e MESH_DEVICE=N300 IMAGE
#
# The base is pinned by digest; the docker backend refuses a FROM that is not. The digest
# below was taken from public records and could not be re-checked from the machine this
# file was written on: refresh it on a machine with registry access
#   docker buildx imagetools inspect docker.io/library/python:3.10-slim-bookworm
# and keep the tag and the digest together.
ARG BASE_IMAGE=docker.io/library/python:3.10-slim-bookworm@sha256:7ed92b32353e8d8bd865b5ba811e0315d3999c3b57b1c2df2b504a359d4a1707
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    LANG=C.UTF-8 \
    LC_ALL=C.UTF-8 \
    TZ=UTC \
    VPR_RUNTIME_ENV=/opt/tt-runtime

# git: plugin sources are cloned at a pinned commit. Nothing else from the distribution.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*

# ttnn and its dependencies: every file hash-checked, nothing resolved at build time.
COPY docker/tt-runtime-requirements.txt /tmp/tt-runtime-requirements.txt
RUN python -m venv /opt/tt-runtime \
    && /opt/tt-runtime/bin/python -m pip install --require-hashes --no-deps \
        -r /tmp/tt-runtime-requirements.txt \
    && rm /tmp/tt-runtime-requirements.txt

WORKDIR /workspace
