"""Synthetic setup.py plugin in the shape of vllm-ascend: the build needs a variable from
the spec's [plugin] build_env, and the vendor runtime is a build and a run requirement."""

import os
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).parent
CHIP = os.environ.get("SYNTH_CHIP")
if not CHIP:
    # vllm-ascend's setup.py stops the same way without SOC_VERSION on a machine with no NPU.
    raise SystemExit(
        "synth-vendorimage-plugin: SYNTH_CHIP is not set; set it to the chip to build for "
        "(a spec sets it with [plugin] build_env)"
    )
# What the build read from its environment goes into the wheel, so a test can see it.
(HERE / "synth_vendorimage_plugin" / "_build_info.py").write_text(f"CHIP = {CHIP!r}\n")


def requirements() -> list[str]:
    lines = (HERE / "requirements.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


setup(
    name="synth-vendorimage-plugin",
    version="0.1.0",
    packages=["synth_vendorimage_plugin"],
    install_requires=requirements(),
    entry_points={"vllm.platform_plugins": ["synth = synth_vendorimage_plugin:register"]},
)
