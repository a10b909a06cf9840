"""Synthetic plugin whose general plugin imports its runtime (eager_sdk) when called."""

import importlib.util


def register() -> str | None:
    present = importlib.util.find_spec("eager_sdk") is not None
    return "eager_plugin.platform.EagerPlatform" if present else None


def register_ops() -> None:
    import eager_sdk  # the runtime: absent wherever the vendor's stack is not installed

    eager_sdk.register_custom_ops()
