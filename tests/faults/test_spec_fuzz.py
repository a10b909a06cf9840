"""Property-based fuzzing of `vpr spec check`: start from buildspec/reference.toml, mutate it
(values of other types, deleted and unknown keys, duplicated tables and lines, control
characters, random unicode, huge numbers, nan/inf, truncated text) and run the real CLI
in-process. Whatever the input, it must end with exit 0 or 2, never a traceback, and write
nothing outside the test's temp folder.

Derandomized (fixed seed): the same 1,000 examples run every time, here and in CI.
"""

from __future__ import annotations

import copy
import functools
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import tomlkit
import tomllib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import REFERENCE_SPEC, repo_state, vpr
from vllm_plugin_release import cli
from vllm_plugin_release.cli import main

REFERENCE_TEXT = REFERENCE_SPEC.read_text(encoding="utf-8")
REFERENCE = tomllib.loads(REFERENCE_TEXT)
EXAMPLES = int(os.environ.get("VPR_FUZZ_EXAMPLES", "1000"))


def _paths(data: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key path in the reference (tables and leaves)."""
    out: list[tuple[str, ...]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            out.append((*prefix, key))
            out.extend(_paths(value, (*prefix, key)))
    return out


PATHS = _paths(REFERENCE)

_nasty_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
    st.sampled_from(
        [
            "",
            "-",
            "--upload-pack=touch pwned",
            "x\n&& touch pwned",
            "a\x00b",
            "\x1b[31m",
            "\u2028",
            "../../etc/passwd",
            "/etc/passwd",
            "file:///",
            "file://host/x",
            "http://",
            "https://[::1",
            "https://pypi.org:99999/simple",
            "0.26.0",
            "0.26.0+local",
            "not a version",
            "a" * 64,
            "f" * 40,
            "docker.io/x@sha256:" + "0" * 64,
        ]
    ),
)
_scalars = st.one_of(
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([2**63 - 1, -(2**63), 0, -1, 10**18]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e308, -0.0]),
    _nasty_text,
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _parent(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    node: Any = data
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node if isinstance(node, dict) else None


@st.composite
def data_mutations(draw: st.DrawFn) -> str:
    """The reference with 1-4 keys replaced, deleted or added, serialized with tomlkit."""
    data = copy.deepcopy(REFERENCE)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(PATHS))
        parent = _parent(data, path)
        if parent is None:
            continue
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(_values)
        elif action == "delete":
            parent.pop(path[-1], None)
        else:
            parent[draw(st.text(min_size=1, max_size=10))] = draw(_values)
    try:
        return tomlkit.dumps(data)
    except Exception:  # a value TOML cannot hold (None-like, mixed keys): use the reference
        return REFERENCE_TEXT


@st.composite
def text_mutations(draw: st.DrawFn) -> str:
    """The reference text cut, spliced with random characters, or with lines/tables doubled."""
    text = REFERENCE_TEXT
    lines = text.splitlines(keepends=True)
    action = draw(st.sampled_from(["truncate", "insert", "duplicate_line", "duplicate_table"]))
    if action == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if action == "insert":
        at = draw(st.integers(0, len(text)))
        junk = draw(
            st.one_of(
                st.text(max_size=10),
                st.binary(max_size=10).map(lambda b: b.decode("latin-1")),
                st.sampled_from(["\x00", "\r", "\n[core]\n", " = nan", "\ufeff", '"""', "[["]),
            )
        )
        return text[:at] + junk + text[at:]
    if action == "duplicate_line":
        i = draw(st.integers(0, len(lines) - 1))
        return "".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])
    headers = [i for i, line in enumerate(lines) if line.startswith("[")]
    i = draw(st.sampled_from(headers))
    end = next((j for j in headers if j > i), len(lines))
    return "".join(lines[:end] + lines[i:end] + lines[end:])


EXIT_CODES: dict[int, int] = {}


@pytest.fixture(scope="module")
def workdir():
    """One temp folder for every example; the repository must look the same afterwards.

    The argument parser is built once (building it is half the cost of a `spec check`);
    everything after `parse_args` runs as in `vpr`.
    """
    before = repo_state()
    cwd = Path.cwd()
    build_parser = cli.build_parser
    cli.build_parser = functools.cache(build_parser)
    with tempfile.TemporaryDirectory(prefix="vpr-fuzz-") as folder:
        os.chdir(folder)
        try:
            yield Path(folder)
        finally:
            os.chdir(cwd)
            cli.build_parser = build_parser
    assert repo_state() == before, "spec check wrote into the repository"
    print(f"\nspec fuzz: exit codes {sorted(EXIT_CODES.items())}")


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=st.one_of(data_mutations(), text_mutations()))
def test_spec_check_never_crashes(workdir: Path, capsys, text: str) -> None:
    spec = workdir / "spec.toml"
    spec.write_text(text, encoding="utf-8", errors="surrogatepass")
    code = main(["spec", "check", str(spec)])  # any non-VprError exception fails the test
    out = capsys.readouterr()
    said = out.out + out.err
    EXIT_CODES[code] = EXIT_CODES.get(code, 0) + 1
    assert code in (0, 2), said
    assert "Traceback" not in said
    if code == 2:
        assert "spec.toml" in said, said  # the message names the file
    assert sorted(p.name for p in workdir.iterdir()) == ["spec.toml"]


SAMPLE = {
    "duplicate key in a table": REFERENCE_TEXT.replace(
        'name = "vllm"', 'name = "vllm"\nname = "x"'
    ),
    "nan median": REFERENCE_TEXT.replace("median = 512", "median = nan"),
    "newline in index": REFERENCE_TEXT.replace(
        'index = "https://pypi.org/simple"', 'index = "x\\n&& touch pwned"'
    ),
    "truncated": REFERENCE_TEXT[: len(REFERENCE_TEXT) // 3],
}


@pytest.mark.parametrize("text", list(SAMPLE.values()), ids=list(SAMPLE))
def test_spec_check_sample_in_a_subprocess(tmp_path: Path, text: str) -> None:
    """A few of the same inputs through the installed entry point, as a user runs it."""
    spec = tmp_path / "spec.toml"
    spec.write_text(text, encoding="utf-8")
    done = vpr("spec", "check", str(spec), cwd=tmp_path, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "spec.toml" in done.stdout + done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]
    assert not (tmp_path.parent / "pwned").exists()
