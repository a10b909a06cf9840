"""$GITHUB_OUTPUT takes lines of text; lists and objects go as the compact JSON they always did."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges.ci import github_output, output_text


def test_outputs_keep_their_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    github_output(
        {
            "versions": output_text(["0.26.0", "0.25.1"]),
            "matrix": output_text({"include": [{"spec": "a.toml"}]}),
            "pinned": output_text("0.25.1"),
            "count": "2",
        }
    )
    assert out.read_text() == (
        'versions=["0.26.0","0.25.1"]\n'
        'matrix={"include":[{"spec":"a.toml"}]}\n'
        "pinned=0.25.1\n"
        "count=2\n"
    )


def test_a_value_that_spans_lines_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out"))
    with pytest.raises(BadInput, match="value of name spans lines"):
        github_output({"name": "a\nb"})
