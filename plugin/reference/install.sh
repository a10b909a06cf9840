#!/usr/bin/env bash
# Install the reference platform stack into the active virtual environment:
#   1. vLLM 0.26.0, built from its sdist (sha256-verified) for VLLM_TARGET_DEVICE=empty;
#   2. vLLM's runtime requirements, read from requirements/common.txt inside
#      that same verified sdist, with overrides.txt applied;
#   3. refrt, the labelled stand-in vendor runtime (skip with INSTALL_RUNTIME=0,
#      which gives the "runtime absent" install of a CPU runner);
#   4. this plugin.
#
# Usage (uv on PATH, a virtual environment activated):
#     plugin/reference/install.sh
#
# vllm-plugin-release reads this script for its pinning check: keep every pin
# exact and every download hash-checked. Re-read requirements/common.txt and
# overrides.txt whenever VLLM_VERSION changes.
set -euo pipefail

VLLM_VERSION=0.26.0
VLLM_SDIST_SHA256=23e9fa19d7e20ce7dcc1c074d41503e2116d23f19e688f5d5ea91b741f958502
# The sdist on PyPI's file host (its URL as listed by https://pypi.org/simple/vllm/).
VLLM_SDIST_URL=https://files.pythonhosted.org/packages/cd/72/fa30f8459d11ae206f1a20bd0ac7ed1b9e390b695fa3dfc9ef6056de0cfe/vllm-0.26.0.tar.gz
TORCH_VERSION=2.13.0+cpu
TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
INSTALL_RUNTIME=${INSTALL_RUNTIME:-1}

# Paths below are relative to this folder (the plugin source).
cd "$(dirname "${BASH_SOURCE[0]}")"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SDIST="$WORK/vllm-$VLLM_VERSION.tar.gz"

# The sdist, verified before anything reads it.
curl -fsSL "$VLLM_SDIST_URL" -o "$SDIST"
echo "$VLLM_SDIST_SHA256  $SDIST" | sha256sum -c -

# torch from the PyTorch CPU index. vLLM's [build-system] asks for
# torch==2.11.0, the CUDA build on PyPI; the empty target compiles no kernels
# and only imports torch in setup.py, so vLLM is built without isolation
# against this CPU build instead (and overrides.txt keeps it installed).
uv pip install --index-url "$TORCH_INDEX_URL" "torch==$TORCH_VERSION"
# vLLM's other build requirements ([build-system] of the sdist), pinned.
uv pip install \
    "cmake==4.4.5" \
    "jinja2==3.1.6" \
    "ninja==1.13.2" \
    "packaging==26.4" \
    "setuptools==80.10.2" \
    "setuptools-rust==1.13.0" \
    "setuptools-scm==10.3.4" \
    "wheel==0.48.0"

# vLLM's runtime requirements come from the verified sdist, not from a URL:
# vLLM's index metadata is generated on a CUDA machine (requirements/cuda.txt),
# so the empty target's list has to be installed explicitly. See overrides.txt.
tar -xzf "$SDIST" -C "$WORK" "vllm-$VLLM_VERSION/requirements/common.txt"
uv pip install --override overrides.txt \
    -r "$WORK/vllm-$VLLM_VERSION/requirements/common.txt"

# vLLM itself: exactly VLLM_VERSION, only from the verified sdist (--no-index
# --find-links), never a binary wheel (--no-binary vllm), and --no-deps so the
# CUDA dependency list in its metadata is never consulted.
VLLM_TARGET_DEVICE=empty uv pip install \
    --no-deps \
    --no-build-isolation \
    --no-binary vllm \
    --no-index \
    --find-links "$WORK" \
    "vllm==$VLLM_VERSION"

# The vendor runtime (a stand-in) and the plugin. Neither declares vllm as a
# dependency, so nothing here can replace the build above.
if [ "$INSTALL_RUNTIME" = "1" ]; then
    uv pip install --no-deps ./runtime
fi
uv pip install --no-deps .
