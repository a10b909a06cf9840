"""Imports the kernels module (which imports the runtime) at import time."""

from . import kernels


def load() -> object:
    return kernels.TABLE
