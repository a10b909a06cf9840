"""Synthetic platform plugin (tests only): never active."""


def register() -> None:
    return None
