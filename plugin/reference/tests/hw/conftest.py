"""Hardware-only tests: they need the vendor runtime (refrt) and a device.

Every test collected under tests/hw/ gets the `hw` marker and is skipped when
the runtime does not import, so the CPU runner reports them as skipped (the
release pipeline lists them as deferred), never as passed. Select them with
`pytest -m hw`; leave them out with `pytest -m "not hw"`.

With the stand-in refrt the "device" is virtual; on a real vendor stack the
same folder holds the tests that need the accelerator.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RUNTIME = "refrt"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_runtime = importlib.util.find_spec(RUNTIME) is not None
    skip = pytest.mark.skip(reason=f"hardware test: vendor runtime `{RUNTIME}` not importable")
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.hw)
            if not has_runtime:
                item.add_marker(skip)
