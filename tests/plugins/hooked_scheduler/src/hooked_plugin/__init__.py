"""Synthetic plugin whose platform hook sets the scheduling policy (tests only)."""


def register() -> None:
    return None  # its runtime exists nowhere: never the active platform
