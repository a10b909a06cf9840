# Build image for the docker backend of `vpr build-core` / `vpr build-plugin`.
# The base is pinned by digest; the docker backend refuses a FROM that is not.
# BASE_IMAGE is passed from the buildspec's [build] base_image.
ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LANG=C.UTF-8 \
    LC_ALL=C.UTF-8 \
    TZ=UTC

# git: git sources and setuptools-scm. Nothing else from the distribution.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*

# uv, pinned by version and hash (the wheel for manylinux x86_64).
COPY docker/uv-requirements.txt /tmp/uv-requirements.txt
RUN python -m pip install --no-cache-dir --require-hashes -r /tmp/uv-requirements.txt \
    && rm /tmp/uv-requirements.txt

WORKDIR /workspace
