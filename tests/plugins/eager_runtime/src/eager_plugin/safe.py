"""Imports the runtime when it is there, and works without it."""

try:
    import eager_sdk
except ImportError:
    eager_sdk = None


def available() -> bool:
    return eager_sdk is not None
