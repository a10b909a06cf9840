"""Synthetic platform plugin whose runtime is the dotted module vendor_sdk.torch."""

import importlib.util


def register() -> str | None:
    try:
        present = importlib.util.find_spec("vendor_sdk.torch") is not None
    except ImportError:
        present = False
    return "dotted_plugin.platform.DottedPlatform" if present else None
