"""`scheduler` (docs half): statements extracted from scheduling notes, and the check."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import spec_head
from vllm_plugin_release.buildspec import model as specmod
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform.checks import scheduler as scheddocs
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.replay.model import parse_report

# Synthetic scheduling notes for a made-up "Acme" plugin, in the shape such notes
# take: a summary list, an upstream comparison, wrapped lines, a code block.
GOOD_DOC = """\
# Acme scheduling

This page explains how the Acme backend schedules work
and how that differs from upstream vLLM.

## Summary

The Acme path is narrower than upstream vLLM:

- Each Acme step is either all-prefill or all-decode.
- Acme never mixes prefill and decode requests in the same
  batch, because the device graph is compiled per phase.
- Chunked prefill is supported, but only for models whose
  kernels can resume a partial prompt.

Upstream vLLM is more general:

- One step may include both prefill and decode tokens.
- Chunked prefill is part of the default scheduler.

## Policy

When no prefill can be admitted, the scheduler falls back to a decode step so
running requests keep making progress.

```python
# An example config; this is code, not a statement:
engine_args = {"mixed batches are supported": True}
```

Acme does not mean:

- arbitrary prefill/decode mixing
"""

PLUGIN_TABLES = """
[plugin]
name = "vllm-acme-plugin"

[plugin.source]
kind = "path"
path = "plugin"
{extra}
"""

MIX = """
[conformance.request_mix]
requests = 300
seed = 7
arrival = {process = "poisson", rate = 4.0}
prompt_tokens = {dist = "lognormal", median = 800, sigma = 0.7, min = 16, max = 6000}
output_tokens = {dist = "lognormal", median = 200, sigma = 0.5, min = 1, max = 1200}
"""


def make(
    tmp_path: Path, doc: str | None = GOOD_DOC, keys: str = "", mix: str = MIX
) -> tuple[specmod.Spec, Path]:
    root = tmp_path / "plugin"
    (root / "docs").mkdir(parents=True, exist_ok=True)
    if doc is not None:
        (root / "docs/SCHED.md").write_text(doc)
    table = f'\n[conformance.scheduler]\ndocs = "docs/SCHED.md"\n{keys}'
    path = tmp_path / "spec.toml"
    path.write_text(spec_head() + PLUGIN_TABLES.format(extra=table + mix))
    return load_spec(path), root


def by_topic(statements: list[scheddocs.Statement], topic: str, subject: str = "plugin"):
    return [
        (s.line, s.polarity, s.conditional)
        for s in statements
        if s.topic == topic and s.subject == subject
    ]


# ---------------------------------------------------------------------------
# Extraction.


def test_extracts_statements_with_lines_subjects_and_lead_ins() -> None:
    st = scheddocs.extract_statements(GOOD_DOC, plugin_name="vllm-acme-plugin")
    assert by_topic(st, "mixed_batches") == [
        (10, "not_supported", False),
        (11, "not_supported", False),  # wrapped sentence keeps its first line
        (33, "not_supported", False),  # negated lead-in "Acme does not mean:"
    ]
    assert by_topic(st, "chunked_prefill") == [(13, "supported", True)]
    assert by_topic(st, "decode_interleaving") == [(23, "supported", True)]
    # Statements about upstream vLLM are kept apart.
    assert by_topic(st, "mixed_batches", "upstream") == [(18, "supported", False)]
    assert by_topic(st, "chunked_prefill", "upstream") == [(19, "supported", False)]
    # Nothing from the code block.
    assert all(s.line < 26 or s.line > 30 for s in st)
    sentence = next(s for s in st if s.line == 11).sentence
    assert sentence.startswith("Acme never mixes prefill and decode requests in the same batch")
    stances = scheddocs.summarize(st)
    assert stances["mixed_batches"]["stance"] == "not_supported"
    assert stances["chunked_prefill"]["stance"] == "conditional"


@pytest.mark.parametrize(
    ("sentence", "topic", "polarity"),
    [
        (
            "The scheduler never mixes prefill and decode requests.",
            "mixed_batches",
            "not_supported",
        ),
        ("The scheduler does not mix prefill and decode work.", "mixed_batches", "not_supported"),
        ("There are no mixed batches.", "mixed_batches", "not_supported"),
        ("Prefill and decode are not co-scheduled.", "mixed_batches", "not_supported"),
        ("Mixed batches are supported.", "mixed_batches", "supported"),
        ("Mixed prefill+decode batches are supported.", "mixed_batches", "supported"),
        (
            "The scheduler puts prefill and decode requests in the same batch.",
            "mixed_batches",
            "supported",
        ),
        ("A step never includes both prefill and decode tokens.", "mixed_batches", "not_supported"),
        ("The scheduler is described in scheduler.py.", "mixed_batches", None),
        ("Chunked prefill is disabled.", "chunked_prefill", "not_supported"),
        ("Chunked prefill is not supported.", "chunked_prefill", "not_supported"),
        ("Chunked prefill is enabled by default.", "chunked_prefill", "supported"),
        ("The platform turns chunked prefill off.", "chunked_prefill", "not_supported"),
        (
            "Decode steps are interleaved between prefill chunks.",
            "decode_interleaving",
            "supported",
        ),
        (
            "The scheduler does not interleave decodes with prefill chunks.",
            "decode_interleaving",
            "not_supported",
        ),
        (
            "Running decodes are stalled while a long prefill runs.",
            "decode_interleaving",
            "not_supported",
        ),
    ],
)
def test_sentence_rules(sentence: str, topic: str, polarity: str) -> None:
    st = [s for s in scheddocs.extract_statements(sentence) if s.topic == topic]
    assert [s.polarity for s in st] == ([polarity] if polarity else []), st


def test_conditions_are_not_statements() -> None:
    text = "When chunked prefill is off, the token budget is raised to the model length."
    st = scheddocs.extract_statements(text)
    assert [(s.topic, s.polarity, s.conditional) for s in st] == [
        ("chunked_prefill", "unknown", True)
    ]


# ---------------------------------------------------------------------------
# The check, each way.


def test_good_docs_pass_without_replay_and_record_the_mix(tmp_path: Path) -> None:
    spec, root = make(tmp_path)
    result = scheddocs.check(spec, root)
    assert result.status == "pass", result.summary
    assert "replay half not yet compared" in result.summary
    assert result.details["replay_compared"] is False
    assert result.details["request_mix"] == {
        "requests": 300,
        "seed": 7,
        "arrival": {"process": "poisson", "rate": 4.0},
        "prompt_tokens": {"dist": "lognormal", "median": 800, "sigma": 0.7, "min": 16, "max": 6000},
        "output_tokens": {"dist": "lognormal", "median": 200, "sigma": 0.5, "min": 1, "max": 1200},
    }
    assert result.details["stated"]["mixed_batches"]["stance"] == "not_supported"
    lines = {e.line for e in result.evidence if e.file == "docs/SCHED.md"}
    assert {10, 11} <= lines


def test_replay_contradicting_no_mixed_batches_fails(tmp_path: Path) -> None:
    spec, root = make(tmp_path)
    clean = {
        "plugin": {"steps": 120, "mixed_steps": 0},
        "upstream": {"steps": 90, "mixed_steps": 40},
    }
    assert scheddocs.check(spec, root, parse_report(clean)).status == "pass"
    bad = {"plugin": {"steps": 120, "mixed_steps": 3}, "upstream": {"mixed_steps": 40}}
    result = scheddocs.check(spec, root, parse_report(bad))
    assert result.status == "fail"
    assert "3 of 120" in result.summary
    assert "docs/SCHED.md:10" in result.summary
    assert result.details["replay_compared"] is True


def test_replay_report_shape(tmp_path: Path) -> None:
    """A replay report as the replay stage writes it: extra keys, None for a crashed side."""
    spec, root = make(tmp_path)
    report = {
        "schema": "vpr-replay/1",
        "plugin": {
            "steps": 50,
            "mixed_steps": 2,
            "first_mixed_step": 7,
            "chunked_prefill_steps": 4,
            "interleaved_decode_steps": 0,
        },
        "upstream": {"crashed": "boom", "steps": None, "mixed_steps": None},
        "ratios": {},
    }
    result = scheddocs.check(spec, root, parse_report(report))
    assert result.status == "fail"
    assert "2 of 50 plugin steps with mixed prefill+decode batches (first at step 7)" in (
        result.summary
    )
    # Chunked prefill is stated as conditional: observing it is no contradiction.
    assert len(result.details["failures"]) == 1 and not result.details["warnings"]
    crashed = {"plugin": {"crashed": "RuntimeError: no KV blocks", "mixed_steps": None}}
    result = scheddocs.check(spec, root, parse_report(crashed))
    assert result.status == "fail"
    assert "failed during the replay" in result.summary


def test_docs_claiming_mixed_batches(tmp_path: Path) -> None:
    mutated = GOOD_DOC.replace(
        "- Each Acme step is either all-prefill or all-decode.\n"
        "- Acme never mixes prefill and decode requests in the same\n"
        "  batch, because the device graph is compiled per phase.\n",
        "- Mixed prefill and decode batches are supported.\n",
    ).replace("Acme does not mean:\n\n- arbitrary prefill/decode mixing\n", "")
    spec, root = make(tmp_path, mutated)
    assert scheddocs.check(spec, root).status == "pass"
    replay = {"plugin": {"steps": 100, "mixed_steps": 0}, "upstream": {"mixed_steps": 25}}
    result = scheddocs.check(spec, root, parse_report(replay))
    assert result.status == "warn"
    assert "saw none in the plugin" in result.summary
    spec, root = make(tmp_path, mutated, keys='unobserved_support = "fail"\n')
    assert scheddocs.check(spec, root, parse_report(replay)).status == "fail"


def test_docs_contradicting_themselves_warn(tmp_path: Path) -> None:
    spec, root = make(tmp_path, GOOD_DOC + "\nMixed batches are supported by Acme.\n")
    result = scheddocs.check(spec, root)
    assert result.status == "warn"
    assert "contradicts itself" in result.summary


def test_docs_silent_on_mixed_batches_fail(tmp_path: Path) -> None:
    silent = "# Acme\n\nChunked prefill is supported.\n"
    spec, root = make(tmp_path, silent)
    result = scheddocs.check(spec, root)
    assert result.status == "fail"
    assert "states nothing about mixed prefill+decode batches" in result.summary


def test_missing_docs_fail_naming_the_file(tmp_path: Path) -> None:
    spec, root = make(tmp_path, doc=None)
    result = scheddocs.check(spec, root)
    assert result.status == "fail"
    assert "docs/SCHED.md missing" in result.summary
    assert "[conformance.scheduler] docs" in result.summary


def test_bad_inputs(tmp_path: Path) -> None:
    # The spec loader rejects the unknown key (the check's schema is part of the spec's) ...
    with pytest.raises(BadInput, match=r"unknown key 'require' in \[conformance\.scheduler\]"):
        make(tmp_path, keys='require = "yes"\n')
    spec, root = make(tmp_path)
    with pytest.raises(BadInput, match=r"plugin\.mixed_steps is missing"):
        scheddocs.check(spec, root, parse_report({"plugin": {"steps": 3}}))
    with pytest.raises(BadInput, match=r"plugin\.mixed_steps must be a count"):
        scheddocs.check(spec, root, parse_report({"plugin": {"mixed_steps": -1}}))


def test_silence_can_be_allowed_and_missing_mix_is_noted(tmp_path: Path) -> None:
    silent = "# Acme\n\nChunked prefill is supported.\n"
    spec, root = make(tmp_path, silent, keys="require_mixed_statement = false\n", mix="")
    result = scheddocs.check(spec, root)
    assert result.status == "pass", result.summary
    assert result.details["request_mix"] is None
    assert "no request mix in the spec" in result.summary
