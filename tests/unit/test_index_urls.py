"""Index URLs: the simple URL of an upload URL, and secrets scrubbed from text and URLs."""

from __future__ import annotations

import pytest

from vllm_plugin_release.core import errors
from vllm_plugin_release.edges import index as ix


def test_simple_url_and_scrub(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ix.simple_url_for("https://upload.pypi.org/legacy/") == "https://pypi.org/simple/"
    assert ix.simple_url_for("https://test.pypi.org/legacy/") == "https://test.pypi.org/simple/"
    assert ix.simple_url_for("http://127.0.0.1:8080/") == "http://127.0.0.1:8080/simple/"
    monkeypatch.setenv("TWINE_PASSWORD", "pypi-AgEIcHlwaS5vcmc")
    text = ix.redact("token pypi-AgEIcHlwaS5vcmc at https://me:pw@host/x")
    assert "AgEI" not in text and "me:pw" not in text and "https://***@host/x" in text
    assert errors.scrub("https://u:p@ss@Host:8080/x?a=b@c") == "https://***@Host:8080/x?a=b@c"
    assert errors.scrub("https://:token@host/") == "https://***@host/"
    assert errors.scrub("https://host/simple/") == "https://host/simple/"
