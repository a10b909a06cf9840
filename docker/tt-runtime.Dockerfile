# TT-Metal runtime image for a hardware runner that keeps the runtime in a venv of its own
# (`vpr env --runtime-env /opt/tt-runtime`, `nox -s conform-hardware`).
#
# The base is the image `vpr image build --spec buildspec/tt.toml` makes here, pinned by
# digest in buildspec/tt.toml [build] base_image: Debian bookworm from its packages with
# SOURCE_DATE_EPOCH, the CPython 3.10 that [build] image_python_sha256 pins copied in at
# /usr/local/bin/python3.10, uv pinned by hash, and libatomic1 (ttnn's libraries load it).
# Anyone can make it again and get the same digest. Without --runtime-env the hardware
# runner needs nothing more than that image: the pairing lock holds ttnn by hash.
#
# ttnn comes from PyPI, pinned by version and sha256 in docker/tt-runtime-requirements.txt
# (the same pins as the pairing lock). ttnn 0.81.1 ships wheels for CPython 3.10 and 3.12
# only (manylinux_2_34; bookworm's glibc 2.36 is new enough).
#
# Run it with the device and hugepages of the host, e.g.
#   docker run --device /dev/tenstorrent -v /dev/hugepages-1G:/dev/hugepages-1G \
#     -e MESH_DEVICE=N300 IMAGE
ARG BASE_IMAGE=localhost/vpr-build:bookworm-py310@sha256:9b6165cdd9427b2ee6d00fbd00edcfa606d17ad9e264cbf678031a8c0727cb8e
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
RUN python3.10 -m venv /opt/tt-runtime \
    && /opt/tt-runtime/bin/python -m pip install --require-hashes --no-deps \
        -r /tmp/tt-runtime-requirements.txt \
    && rm /tmp/tt-runtime-requirements.txt

WORKDIR /workspace
