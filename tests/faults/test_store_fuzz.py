"""Property-based fuzzing of what a manifest store serves: its index and its summary
(through `vpr manifest query` and `matrix`), a manifest and its signed statement (`vpr
manifest verify`), and the ledger (`vpr manifest ledger`), each mutated (values of other
types, deleted and unknown keys, nesting, nasty text, bytes cut, spliced or flipped) and
run through the real CLI in process. Half of the mutated files are signed again with the
store's key (a buggy or hostile publisher, so that the parsing behind the signature is
reached), half are not (an attacker without the key: refused by the signature or the
store's head, or not read at all: query and matrix read the summary of the signed index).

Whatever the input: exit 0, 1, 2 or 3, never a traceback, nothing written outside the
test's temp folder. Derandomized (fixed seed): the same examples every run, here and in CI
(`VPR_STORE_FUZZ_EXAMPLES` per target, default 400 + 300 + 300 + 300 = 1,300).
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.pairing import built_manifest, manifest_variant, sign_store, typed, write_manifest
from tests.support import repo_state
from vllm_plugin_release import cli
from vllm_plugin_release.cli import main
from vllm_plugin_release.core import attest, ledger, signed
from vllm_plugin_release.core import manifestdoc as doc
from vllm_plugin_release.core.cache import canonical_json
from vllm_plugin_release.edges import keys, trust
from vllm_plugin_release.edges.store import DirStore

EXAMPLES = int(os.environ.get("VPR_STORE_FUZZ_EXAMPLES", "0")) or None
CODES = (0, 1, 2, 3)

_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            "",
            "../../etc/passwd",
            "/etc/passwd",
            "file:///etc/passwd",
            "http://[::1",
            "--seed",
            "a\x00b",
            "\x1b[2J",
            "not a version",
            "0.26.0",
            ">=0.1",
            "fleet",
            "lab",
            "a" * 64,
            "é" * 3,
            "\ud7ff",
        ]
    ),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    out: list[tuple] = []
    if isinstance(data, dict):
        for key, value in data.items():
            out.append((*prefix, key))
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out.append((*prefix, i))
            out.extend(_paths(value, (*prefix, i)))
    return out


@st.composite
def mutated_json(draw: st.DrawFn, original: Any, text: bool = True) -> bytes:
    """`original` with 1-3 values replaced, deleted or added, or a value nested deep, as
    JSON bytes; or (when `text`) its text cut or spliced with junk."""
    if text and draw(st.integers(0, 4)) == 0:
        text = json.dumps(original, indent=2, sort_keys=True).encode()
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            return text[:at]
        junk = draw(st.one_of(st.binary(max_size=8), st.sampled_from([b"\xff", b"[" * 70])))
        return text[:at] + junk + text[at:]
    data = copy.deepcopy(original)
    paths = _paths(data)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        parent: Any = data
        for key in path[:-1]:
            try:
                parent = parent[key]
            except (KeyError, IndexError, TypeError):
                parent = None
                break
        if not isinstance(parent, dict | list):
            continue
        action = draw(st.sampled_from(["replace", "delete", "add", "deep"]))
        if isinstance(parent, list) and action in ("delete", "add"):
            action = "replace"
        try:
            if action == "replace":
                parent[path[-1]] = draw(_values)
            elif action == "delete":
                parent.pop(path[-1], None)
            elif action == "add":
                parent[draw(st.text(min_size=1, max_size=8))] = draw(_values)
            else:
                deep: Any = "x"
                for _ in range(draw(st.sampled_from([10, 63, 64, 65, 200]))):
                    deep = [deep]
                parent[path[-1]] = deep
        except (IndexError, TypeError):
            continue
    return json.dumps(data, indent=2, sort_keys=True).encode()


# ---------------------------------------------------------------------------
# One store, made once, copied into a fresh folder per example


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    """A signed store (2 pairings with their statements, 3 ledger entries) and its key, in
    a temp folder that is the working folder and cache of every example. The parser is
    built once (as in test_spec_fuzz)."""
    before = repo_state()
    build_parser = cli.build_parser
    cli.build_parser = functools.cache(build_parser)
    cwd = Path.cwd()
    folder = Path(tempfile.mkdtemp(prefix="vpr-store-fuzz-"))
    saved = os.environ.get("VPR_CACHE_DIR")
    os.environ["VPR_CACHE_DIR"] = str(folder / ".vpr")
    os.chdir(folder)
    try:
        yield _make_world(folder, tmp_path_factory.mktemp("dist") / "ref")
    finally:
        os.chdir(cwd)
        shutil.rmtree(folder, ignore_errors=True)  # each run left one in /tmp
        cli.build_parser = build_parser
        if saved is None:
            os.environ.pop("VPR_CACHE_DIR", None)
        else:
            os.environ["VPR_CACHE_DIR"] = saved
    assert repo_state() == before, "the store fuzz wrote into the repository"
    print(f"\nstore fuzz: exit codes {sorted(CODES_SEEN.items())}")


def _make_world(folder: Path, dist: Path) -> dict[str, Any]:
    private, public = keys.generate_keypair(folder / ".vpr" / keys.DEFAULT_KEY)
    key = keys.load_private_key(private)
    root = folder / "pristine"
    store = DirStore(root, signer=key)
    base = built_manifest(dist)
    manifests = [
        manifest_variant(base, commit=c * 40, core=v) for c, v in (("1", "0.26.0"), ("2", "0.25.1"))
    ]
    for m in manifests:
        path = write_manifest(folder / "in", m, "manifest.json")
        (folder / "in" / "manifest.intoto.jsonl").write_bytes(_statement(m, path.read_bytes(), key))
        store.add(path, folder / "in" / "manifest.intoto.jsonl")
        entry = ledger.entry_from_manifest(
            typed(m), manifest_sha256=hashlib.sha256(path.read_bytes()).hexdigest(), runner="cpu",
            time="2026-12-01T00:00:00Z",
        )  # fmt: skip
        trust.append(store, entry, key)
    trust.append(store, dataclasses.replace(entry, verdict="lab"), key)
    index = json.loads((root / "index.json").read_text())
    lines = (root / ledger.LEDGER_FILE).read_bytes().splitlines(keepends=True)
    return {"folder": folder, "root": root, "key": key, "public": public, "index": index,
            "manifests": manifests, "lines": lines}  # fmt: skip


def _statement(manifest: dict[str, Any], data: bytes, key: Any) -> bytes:
    sha = hashlib.sha256(data).hexdigest()
    return attest.signed_bytes(
        attest.build_statement(manifest, sha, {}, builder_id=attest.LOCAL_BUILDER), key
    )


CODES_SEEN: dict[int, int] = {}


def _fresh(world: dict[str, Any]) -> Path:
    """A copy of the pristine store for one example (the folder's other names stay)."""
    import shutil

    target = world["folder"] / "store"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(world["root"], target)
    # no head remembered from an example before (one signed again is newer than pristine's)
    shutil.rmtree(world["folder"] / ".vpr" / "trust", ignore_errors=True)
    return target


def _run(world: dict[str, Any], capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)  # any exception but the CLI's own fails the example
    out = capsys.readouterr()
    said = out.out + out.err
    CODES_SEEN[code] = CODES_SEEN.get(code, 0) + 1
    assert code in CODES, said
    assert "Traceback" not in said
    expected = {".vpr", "in", "pristine", "store", "manifest.json", "manifest.intoto.jsonl"}
    assert {p.name for p in world["folder"].iterdir()} <= expected
    return said


def _settings(default: int) -> Any:
    return settings(
        max_examples=EXAMPLES or default,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )


# ---------------------------------------------------------------------------
# The targets


@st.composite
def index_case(draw: st.DrawFn, index: dict[str, Any]) -> tuple[bytes, bool, list[str]]:
    data = draw(mutated_json(index))
    command = draw(
        st.sampled_from(
            [
                ["query"],
                ["query", "--json"],
                ["query", "--core", ">=0.25", "--verdict", "pilot"],
                ["matrix"],
                ["matrix", "--json"],
                ["matrix", "--format", "html"],
            ]
        )
    )
    return data, draw(st.booleans()), command


@_settings(400)
@given(case=st.data())
def test_store_index_fuzz(world: dict[str, Any], capsys, case: st.DataObject) -> None:
    """Signed again (`sign-store`: the summary made again from the mutated index, or none
    when it does not check), query and matrix parse what the mutation left; not signed,
    they read the summary of the index the head vouches for: never the mutation."""
    data, resign, command = case.draw(index_case(world["index"]))
    store = _fresh(world)
    (store / "index.json").write_bytes(data)
    if resign:
        sign_store(store, world["key"])
    said = _run(world, capsys, ["manifest", *command, "--store", str(store)])
    if not resign and data != (world["root"] / "index.json").read_bytes():
        assert said == _pristine(world, capsys, command).replace("pristine", "store"), said


def _pristine(world: dict[str, Any], capsys, command: list[str]) -> str:
    """What `command` says about the pristine store (run once per command)."""
    key = tuple(command)
    if key not in PRISTINE:
        PRISTINE[key] = _run(world, capsys, ["manifest", *command, "--store", str(world["root"])])
    return PRISTINE[key]


PRISTINE: dict[tuple[str, ...], str] = {}


@st.composite
def summary_case(draw: st.DrawFn, root: Path) -> tuple[str, bytes, bool, list[str]]:
    """summary.json or one of the files under summary/ mutated (JSON values, or bytes cut
    and spliced); signed again or not."""
    files = ["summary.json", *sorted(f"summary/{p.name}" for p in (root / "summary").iterdir())]
    name = draw(st.sampled_from(files))
    original = (root / name).read_bytes()
    if name.endswith(".txt"):  # a rendered matrix: bytes
        at = draw(st.integers(0, len(original)))
        junk = draw(st.binary(max_size=8))
        data = original[:at] + junk + original[at + draw(st.integers(0, 4)) :]
    else:
        data = draw(mutated_json(json.loads(original)))
    command = draw(
        st.sampled_from(
            [["query"], ["query", "--json"], ["query", "--core", "0.26.0"],
             ["query", "--plugin", "vpr-test-plugin", "--verdict", "pilot"], ["matrix"],
             ["matrix", "--json"], ["matrix", "--format", "markdown"]]
        )
    )  # fmt: skip
    return name, data, draw(st.booleans()), command


@_settings(300)
@given(case=st.data())
def test_store_summary_fuzz(world: dict[str, Any], capsys, case: st.DataObject) -> None:
    """A mutated summary signed again by a buggy publisher (its head over the files as they
    are) is parsed without a traceback; not signed again it is refused (exit 1), naming
    the summary file."""
    name, data, resign, command = case.draw(summary_case(world["root"]))
    store = _fresh(world)
    (store / name).write_bytes(data)
    resign = resign and name == "summary.json"  # the head names only summary.json
    if resign:
        sign_store(store, world["key"], check=False)
    said = _run(world, capsys, ["manifest", *command, "--store", str(store)])
    if not resign and data != (world["root"] / name).read_bytes():
        pristine = _pristine(world, capsys, command).replace("pristine", "store")
        assert said == pristine or "summary" in said, said


@_settings(300)
@given(case=st.data())
def test_manifest_fuzz(world: dict[str, Any], capsys, case: st.DataObject) -> None:
    manifest = world["manifests"][0]
    data = case.draw(mutated_json(manifest))
    resign = case.draw(st.booleans())
    folder = world["folder"]
    path = folder / "manifest.json"
    path.write_bytes(data)
    original = doc.manifest_bytes(manifest)
    signed_over = data if resign else original
    try:
        parsed = json.loads(signed_over)
    except ValueError:
        parsed = manifest
    if not isinstance(parsed, dict) or not _statement_ok(parsed):
        parsed = manifest
    (folder / "manifest.intoto.jsonl").write_bytes(_statement(parsed, signed_over, world["key"]))
    _run(world, capsys, ["manifest", "verify", str(path), "--key", str(world["public"]),
                         "--manifest-only"])  # fmt: skip


def _statement_ok(manifest: dict[str, Any]) -> bool:
    """Whether a statement can be built over `manifest` (the keys build_statement reads)."""
    try:
        attest.build_statement(manifest, "0" * 64, {}, builder_id="x")
    except (KeyError, TypeError, AttributeError, IndexError):
        return False
    return True


@st.composite
def ledger_case(draw: st.DrawFn, lines: list[bytes], key: Any) -> tuple[bytes, bool]:
    """The ledger with lines dropped, doubled, swapped, cut or flipped (bytes), or one
    entry's content mutated and its line signed again (and the chain after it redone)."""
    lines = list(lines)
    action = draw(st.sampled_from(["drop", "double", "swap", "cut", "flip", "entry", "junk"]))
    i = draw(st.integers(0, len(lines) - 1))
    if action == "drop":
        del lines[i]
    elif action == "double":
        lines.insert(i, lines[i])
    elif action == "swap":
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    elif action == "cut":
        lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
    elif action == "flip":
        at = draw(st.integers(0, len(lines[i]) - 1))
        lines[i] = lines[i][:at] + bytes([lines[i][at] ^ 0x20]) + lines[i][at + 1 :]
    elif action == "junk":
        lines.insert(i, draw(st.binary(max_size=20)) + b"\n")
    else:
        entries = [json.loads(base64.b64decode(json.loads(line)["payload"])) for line in lines]
        entries[i] = json.loads(draw(mutated_json(entries[i], text=False)))
        lines = _signed_chain(entries, key)
    return b"".join(lines), draw(st.booleans())


def _signed_chain(entries: list[Any], key: Any) -> list[bytes]:
    out: list[bytes] = []
    for n, entry in enumerate(entries):
        if isinstance(entry, dict):
            prev = ledger.line_digest(out[-1]) if out else ledger.GENESIS
            entry = {**entry, "seq": n + 1, "prev": prev}
        out.append(signed.sign(signed.payload_of(entry), ledger.PAYLOAD_TYPE, key)
                   if isinstance(entry, dict)
                   else (canonical_json(entry) + "\n").encode())  # fmt: skip
    return out


@_settings(300)
@given(case=st.data())
def test_ledger_fuzz(world: dict[str, Any], capsys, case: st.DataObject) -> None:
    data, resign = case.draw(ledger_case(world["lines"], world["key"]))
    command = case.draw(
        st.sampled_from(
            [[], ["--json"], ["--matrix", "markdown"], ["--matrix", "json"], ["--core", "0.26.0"],
             ["--plugin", "vpr-test-plugin", "--kind", "release"]]
        )
    )  # fmt: skip
    store = _fresh(world)
    (store / ledger.LEDGER_FILE).write_bytes(data)
    if resign:  # as a buggy publisher would (a writer of vpr's checks each line first)
        sign_store(store, world["key"], check=False)
    _run(world, capsys, ["manifest", "ledger", "--store", str(store), *command])
