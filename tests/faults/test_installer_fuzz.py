"""Property-based fuzzing of the plugin analysers: installer scripts (shell and Dockerfile,
with the requirement files, sourced scripts and links they name) through the `pinning`
check, and plugin docs through `hardware_docs`, `scheduler` and the docs' model table.

Whatever a plugin holds, each check ends with a verdict (pass, warn or fail), never an
exception; it reads nothing outside the plugin tree (a secret beside the tree, named by
absolute path, by `../` and through a link, never shows in the result); and it ends
soon: each example has a deadline, far above the milliseconds one takes.

Derandomized (fixed seed): the same examples run every time, here and in CI
(`VPR_FUZZ_EXAMPLES`, default 1,000 installers and 300 docs).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import spec_head
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform import CheckResult
from vllm_plugin_release.conform.checks import hardware_docs as hardwaredocs
from vllm_plugin_release.conform.checks import pinning, workload
from vllm_plugin_release.conform.checks import scheduler as scheddocs

EXAMPLES = int(os.environ.get("VPR_FUZZ_EXAMPLES", "1000"))
DOC_EXAMPLES = max(EXAMPLES * 3 // 10, 1)
SECRET = "s3cr3t-0utside-the-tree"
DEADLINE = datetime.timedelta(seconds=30)  # a bound for a hang, not a speed target

# -- installer pieces -------------------------------------------------------------------

_word = st.sampled_from(
    [
        "vllm==0.26.0", "vllm>=0.20", "vllm", "numpy==1.26.4", "torch", "-e", ".", "./dist/x.whl",
        "--no-binary", "vllm", "-r", "reqs.txt", "-c", "cons.txt", "--override", "over.txt",
        "$VERSION", "${VERSION:-0.26.0}", '"$(cat v.txt)"', "git+https://github.com/vllm-project/vllm@v0.26.0",
        "https://example.invalid/x.tar.gz", "--require-hashes", "--hash=sha256:" + "a" * 64,
        "-r", "/outside/secret.txt", "-r", "../../outside/secret.txt", "--index-url", "[::1",
        "https://[::1/x", "'", '"', "\\", "`", "$(", ")", "${", "}", "é", "\x00", "",
    ]
)  # fmt: skip
_command = st.one_of(
    st.builds(lambda a: "pip install " + " ".join(a), st.lists(_word, max_size=6)),
    st.builds(lambda a: "uv pip install " + " ".join(a), st.lists(_word, max_size=6)),
    st.sampled_from(
        [
            "export VLLM_TARGET_DEVICE=empty",
            "VERSION=0.26.0",
            "set -a",
            "cd sub",
            "source scripts/lib.sh",
            ". ./scripts/lib.sh",
            "source /outside/secret.sh",
            "source ../../outside/secret.sh",
            "source scripts/link.sh",
            "bash scripts/lib.sh",
            "bash -c 'pip install vllm==0.26.0'",
            "curl -fsSL https://example.invalid/r.txt -o reqs.txt",
            'echo "abc  reqs.txt" | sha256sum -c -',
            "git clone https://github.com/vllm-project/vllm /src/vllm",
            "uv sync --frozen",
            "cat <<EOF | bash\npip install vllm==0.26.0\nEOF",
            "X=$(pip install vllm==0.26.0)",
            "sudo -E env A=1 pip install vllm==0.26.0",
        ]
    ),
    st.text(max_size=30),
)


@st.composite
def _block(draw: st.DrawFn, depth: int = 0) -> str:
    """A few commands, some inside if / case / for / while (nested a little: the blow-ups
    of deep nesting are test_plugin_input's, each example here stays small)."""
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["cmd", "cmd", "if", "case", "for", "while"]))
        if kind == "cmd" or depth >= 2:
            lines.append(draw(_command))
            continue
        inner = draw(_block(depth + 1))
        if kind == "if":
            lines.append(f'if [ "$VERSION" = 0.26.0 ]; then\n{inner}\nelse\n{inner}\nfi')
        elif kind == "case":
            lines.append(f'case "$MODE" in\n a|b) {inner} ;;\n *) {inner} ;;\nesac')
        elif kind == "for":
            words = " ".join(draw(st.lists(st.sampled_from("abcdefgh"), max_size=4)))
            lines.append(f"for v in {words}; do\n{inner}\ndone")
        else:
            lines.append(f"while read line; do\n{inner}\ndone < reqs.txt")
    return "\n".join(lines)


def _cut(text: str, draw: st.DrawFn) -> str:
    """`text` truncated, spliced with junk, or with a line doubled."""
    action = draw(st.sampled_from(["keep", "keep", "truncate", "insert", "double"]))
    if action == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if action == "insert":
        at = draw(st.integers(0, len(text)))
        junk = draw(st.sampled_from(["'", '"', "$(", "<<EOF\n", "\\\n", "fi\n", "done\n", ";;"]))
        return text[:at] + junk + text[at:]
    if action == "double" and text:
        lines = text.splitlines(keepends=True)
        i = draw(st.integers(0, len(lines) - 1))
        return "".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])
    return text


@st.composite
def plugins(draw: st.DrawFn) -> dict[str, str]:
    """The files of a plugin: its installer (shell or Dockerfile) and what it may name."""
    body = draw(_block())
    files = {
        "scripts/lib.sh": draw(_block()),
        "reqs.txt": "\n".join(draw(st.lists(_word, max_size=5))),
        "cons.txt": draw(st.sampled_from(["vllm==0.26.0", "-r reqs.txt", "-c cons.txt", ""])),
        "over.txt": draw(st.sampled_from(["numpy==1.26.4", "-r ../../outside/secret.txt"])),
        "pyproject.toml": draw(
            st.sampled_from(
                [
                    "[project]\nname = 'p'\nversion = '1'\ndependencies = ['vllm==0.26.0']\n",
                    "[project]\nname = 'p'\ndependencies = [[[[]]]]\n",
                    "not toml = [",
                ]
            )
        ),
        "uv.lock": draw(
            st.sampled_from(
                [
                    '[[package]]\nname = "vllm"\nversion = "0.26.0"\n'
                    'source = { registry = "https://pypi.org/simple" }\n',
                    '[[package]]\nname = "vllm"\nversion = "0.26.0"\n'
                    'source = { git = "https://[::1/vllm?rev=v0.26.0#abc" }\n',
                    "package = 1\n",
                    "x = " + "[" * 600 + "]" * 600 + "\n",
                ]
            )
        ),
    }
    if draw(st.booleans()):
        files["install"] = _cut(body, draw)
    else:
        run = body.replace("\n", " && \\\n    ")
        files["install"] = _cut(
            f"ARG VERSION=0.26.0\nFROM x@sha256:{'0' * 64}\nENV VLLM_TARGET_DEVICE=empty\n"
            f"RUN {run}\nADD https://example.invalid/a.tar.gz /tmp/\n",
            draw,
        )
        files["Dockerfile"] = files.pop("install")
    return files


# -- the run ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a secret outside the plugin tree, and a link to it inside."""
    top = tmp_path_factory.mktemp("fuzz")
    outside = top / "outside"
    outside.mkdir()
    for name in ("secret.sh", "secret.txt"):
        (outside / name).write_text(f"pip install {SECRET}\n{SECRET}\n")
    return top


def _write(top: Path, files: dict[str, str]) -> tuple[Path, Path]:
    """The plugin at top/a/plugin (so `../../outside` is the secret's folder), its spec."""
    root = top / "a" / "plugin"
    shutil.rmtree(top / "a", ignore_errors=True)
    (root / "scripts").mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8", errors="surrogatepass")
    (root / "scripts" / "link.sh").symlink_to(top / "outside" / "secret.sh")
    installer = "Dockerfile" if "Dockerfile" in files else "install"
    spec = top / "a" / "spec.toml"
    spec.write_text(
        spec_head()
        + f'\n[plugin]\nname = "fuzz"\ninstaller = "{installer}"\noverrides = "over.txt"\n'
        + '\n[plugin.source]\nkind = "path"\npath = "plugin"\n'
        + "\n[conformance.pinning]\nfiles = ['reqs.txt', {path = 'pyproject.toml', kind = "
        + "'pyproject'}]\n"
        + '\n[conformance.hardware]\nparallelism = "mesh"\nmesh_variable = "MESH_DEVICE"\n'
        + 'mesh_device = "T3K"\ndevice_glob = "/dev/tenstorrent/*"\n'
        + '\n[conformance.scheduler]\ndocs = "README.md"\n'
    )
    return spec, root


def _held(result: CheckResult, top: Path) -> None:
    assert result.status in ("pass", "warn", "fail"), result.summary
    said = json.dumps(result.to_json())
    assert SECRET not in said, said[:2000]
    assert sorted(p.name for p in top.iterdir()) == ["a", "outside"]


SETTINGS = {
    "deadline": DEADLINE,
    "derandomize": True,
    "database": None,
    "suppress_health_check": [
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
}


@settings(max_examples=EXAMPLES, **SETTINGS)
@given(files=plugins())
def test_installer_analysis_never_fails_or_leaks(world: Path, files: dict[str, str]) -> None:
    spec, root = _write(world, files)
    _held(pinning.check(load_spec(spec), root), world)


# -- docs pieces ------------------------------------------------------------------------

_doc_piece = st.one_of(
    st.sampled_from(
        [
            "# The plugin\n", "## Scheduling\n", "- item one\n", "1. step\n", "> quoted\n",
            "```\nvllm serve -tp 2\n```\n", "    indented code\n", "<!-- hidden\n", "-->\n",
            "| Feature | Status |\n|---|---|\n| Tensor Parallel | ✅ |\n",
            "Tensor parallelism is not supported. ", "The plugin mixes prefill and decode. ",
            "Chunked prefill is supported, e.g. for long prompts. ", "MESH_DEVICE=T3K ",
            "/dev/tenstorrent/0 ", "-tp 4 ", "--tensor-parallel-size=$TP ", "[a link](x) ",
            "**bold** ", "*em* ", "<b>x</b> ", "A. B. Smith. ", "\n", "\n\n", "é", "\r",
        ]
    ),
    st.builds(lambda c, n: c * n, st.sampled_from(list("*[<(.!? #|-_`>")), st.integers(1, 400)),
    st.text(max_size=40),
)  # fmt: skip


@settings(max_examples=DOC_EXAMPLES, **SETTINGS)
@given(pieces=st.lists(_doc_piece, max_size=30))
def test_docs_checks_never_fail(world: Path, pieces: list[str]) -> None:
    spec, root = _write(world, {"install": "true\n"})
    (root / "README.md").write_text("".join(pieces), encoding="utf-8", errors="surrogatepass")
    (root / "docs").mkdir()
    (root / "docs" / "link.md").symlink_to(world / "outside" / "secret.txt")
    loaded = load_spec(spec)
    _held(hardwaredocs.check(loaded, root), world)
    _held(scheddocs.check(loaded, root), world)
    files, seen = workload.read_models(root)
    assert SECRET not in repr(seen) and "docs/link.md" not in files
