"""Synthetic setup.py-only plugin: dynamic dependencies, an extra build requirement."""

from pathlib import Path

import attrs  # a build requirement beyond setuptools (declared in [build-system])
from setuptools import setup


@attrs.define
class Meta:
    name: str
    version: str


def requirements() -> list[str]:
    lines = (Path(__file__).parent / "requirements.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


META = Meta("synth-setuppy-plugin", "0.2.0")

setup(
    name=META.name,
    version=META.version,
    packages=["synth_setuppy_plugin"],
    install_requires=requirements(),
    entry_points={"vllm.platform_plugins": ["synth = synth_setuppy_plugin:register"]},
)
