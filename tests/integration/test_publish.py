"""Publish against a real pypiserver on loopback (started by the tests and by vpr itself)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import b64_digest, make_pairing, vpr, write_spec, write_wheel
from tests.support import serve_in_thread
from vllm_plugin_release.core.cache import sha256_file
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.edges import index as ix
from vllm_plugin_release.stages import publish as pub

FAST_RETRY = {"VPR_PUBLISH_ATTEMPTS": "3", "VPR_PUBLISH_BACKOFF": "0.05"}


def _project(tmp_path: Path, **kw: Any) -> Path:
    """A project folder with a spec and a built, signed manifest in dist/ref/."""
    spec = write_spec(tmp_path)
    make_pairing(tmp_path / "dist" / "ref", **kw)
    done = vpr("manifest", "build", "--spec", str(spec), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return spec


class FlakyProxy:
    """Forwards to a real index; answers 503 to uploads once `fail_after` uploads went through."""

    def __init__(self, upstream: str, fail_after: int, *, lie_after_upload: bool = False) -> None:
        self.upstream = upstream.rstrip("/")
        self.fail_after = fail_after
        self.posts = 0
        # once an upload went through, every sha256 on the index's pages reads 000...0
        self.lie_after_upload = lie_after_upload
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _forward(self, body: bytes | None) -> None:
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() in ("content-type", "accept", "authorization")
                }
                req = urllib.request.Request(
                    proxy.upstream + self.path, data=body, headers=headers, method=self.command
                )
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        status, data, ctype = r.status, r.read(), r.headers.get("Content-Type")
                except urllib.error.HTTPError as exc:
                    status, data, ctype = exc.code, exc.read(), exc.headers.get("Content-Type")
                if body is None and proxy.lie_after_upload and proxy.posts:
                    data = re.sub(rb"[0-9a-f]{64}", b"0" * 64, data)
                self.send_response(status)
                self.send_header("Content-Type", ctype or "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                proxy.posts += 1
                if proxy.posts > proxy.fail_after:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self._forward(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        serve_in_thread(self.server)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def pypi(tmp_path: Path) -> Any:
    server = ix.LocalIndex(tmp_path / "served" / "packages")
    target = server.start()
    yield target
    server.stop()


def test_default_publish_is_real_and_idempotent(tmp_path: Path) -> None:
    spec = _project(tmp_path)
    done = vpr("publish", "--spec", str(spec), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result["wheels"].values()) == {"uploaded"}
    assert result["install_proven"] is True
    assert result["store_status"] == "added"
    served = sorted(p.name for p in (tmp_path / ".vpr" / "index").glob("*.whl"))
    assert served == sorted(p.name for p in (tmp_path / "dist" / "ref").glob("*.whl"))
    index = json.loads((tmp_path / ".vpr" / "store" / "index.json").read_text())
    assert [e["verdict"] for e in index["pairings"].values()] == ["pilot"]

    again = vpr("publish", "--spec", str(spec), "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert set(result["wheels"].values()) == {"present"}
    assert result["store_status"] == "unchanged"

    # Same file name on the index, different bytes: refused, store untouched.
    dist = tmp_path / "dist" / "ref"
    plugin = next(dist.glob("vpr_test_plugin-*.whl"))
    write_wheel(dist, "vpr-test-plugin", "0.1.0", {"vpr_test_plugin/__init__.py": "changed\n"})
    record = json.loads((dist / "build-plugin.json").read_text())
    record["wheel"]["sha256"] = sha256_file(plugin)
    (dist / "build-plugin.json").write_text(json.dumps(record))
    assert vpr("manifest", "build", "--spec", str(spec), cwd=tmp_path).returncode == 0
    before = (tmp_path / ".vpr" / "store" / "index.json").read_bytes()
    clash = vpr("publish", "--spec", str(spec), cwd=tmp_path)
    assert clash.returncode == 1, clash.stderr
    assert "already on the index with sha256" in clash.stderr
    assert (tmp_path / ".vpr" / "store" / "index.json").read_bytes() == before


def test_install_proof_travels_with_the_index_folder(tmp_path: Path) -> None:
    """A fresh cache whose index folder already holds the same wheels, proven on the same
    runner: the proof is not run again (no pypiserver started). The same folder with one
    wheel's bytes changed is never taken as proven: publish refuses it (exit 1)."""
    import shutil

    spec = _project(tmp_path)
    first = vpr("publish", "--spec", str(spec), "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["install_proven"] is True and result["proven_in"] == {"kind": "local"}
    assert "vpr twine check --strict\n" in first.stderr  # checked before the upload
    run = json.loads((tmp_path / "dist" / "ref" / "run.json").read_text())
    assert run["publish"]["install_proof_ran_in"] == {"kind": "local"}

    for name, mutate in (("fresh", False), ("mutated", True)):
        cache = tmp_path / name / ".vpr"
        shutil.copytree(tmp_path / ".vpr" / "index", cache / "index")
        if mutate:
            served = next((cache / "index").glob("vpr_test_plugin-*.whl"))
            with served.open("ab") as fh:
                fh.write(b"\0")  # same name, other bytes
        args = ("publish", "--spec", str(spec), "--store", str(tmp_path / name / "store"))
        # the fresh cache holds no key: the one the manifest was signed with signs the store
        key = tmp_path / ".vpr" / "keys" / "manifest-signing.key"
        args += ("--signing-key", str(key))
        done = vpr(*args, "--json", cwd=tmp_path, env={"VPR_CACHE_DIR": str(cache)})
        if mutate:
            assert done.returncode == 1, done.stderr
            assert "already on the index with sha256" in done.stderr
            assert "vpr twine check --strict\n" in done.stderr  # not proven: checked again
            assert not (tmp_path / name / "store").exists()
            continue
        assert done.returncode == 0, done.stderr
        again = json.loads(done.stdout)
        assert "install proven by an earlier run" in again["index"]
        assert set(again["wheels"].values()) == {"present"}
        assert again["install_proven"] is True and again["proven_in"] == {"kind": "local"}
        assert not (cache / "index-server.log").exists()  # no pypiserver was started
        # the run that proved these very bytes ran twine check on them before uploading
        assert "twine check --strict: passed by the run that proved" in done.stderr


def _break_description(wheel: Path) -> None:
    """Rewrite `wheel` with a long description that `twine check --strict` refuses (broken
    reStructuredText), its RECORD kept true."""
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    meta = next(n for n in members if n.endswith("METADATA"))
    text = members[meta].decode()
    text = text.replace("text/markdown", "text/x-rst").split("\n\n")[0] + "\n\n`broken <rst\n"
    members[meta] = text.encode()
    record = next(n for n in members if n.endswith("RECORD"))
    members[record] = (
        "".join(
            f"{n},sha256={b64_digest(d)},{len(d)}\n" for n, d in members.items() if n != record
        ).encode()
        + f"{record},,\n".encode()
    )
    with zipfile.ZipFile(wheel, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, d)


def test_uncertified_and_bad_metadata_are_gates(tmp_path: Path) -> None:
    spec = _project(tmp_path, verdict="lab")
    done = vpr("publish", "--spec", str(spec), cwd=tmp_path)
    assert done.returncode == 1 and "verdict is lab" in done.stderr
    assert not (tmp_path / ".vpr" / "index").exists()

    # A wheel whose metadata fails `twine check --strict`.
    dist = tmp_path / "dist" / "ref"
    card = json.loads((dist / "scorecard.json").read_text())
    card["verdict"] = "pilot"
    card["checks"].pop("pinning")
    (dist / "scorecard.json").write_text(json.dumps(card))
    plugin = next(dist.glob("vpr_test_plugin-*.whl"))
    _break_description(plugin)
    rec = json.loads((dist / "build-plugin.json").read_text())
    rec["wheel"]["sha256"] = sha256_file(plugin)
    (dist / "build-plugin.json").write_text(json.dumps(rec))
    assert vpr("manifest", "build", "--spec", str(spec), cwd=tmp_path).returncode == 0
    bad = vpr("publish", "--spec", str(spec), cwd=tmp_path)
    assert bad.returncode == 1, bad.stderr
    assert "twine check --strict" in bad.stderr
    assert not (tmp_path / ".vpr" / "store").exists()


def test_5xx_mid_upload_retries_then_exit_3_and_store_untouched(
    tmp_path: Path, pypi: ix.IndexTarget
) -> None:
    spec = _project(tmp_path)
    proxy = FlakyProxy(pypi.upload_url, fail_after=1)
    store = tmp_path / "store"
    secret = "s3cret-publish-token"
    env = {**FAST_RETRY, "TWINE_USERNAME": "release-bot", "TWINE_PASSWORD": secret}
    try:
        args = ("publish", "--spec", str(spec), "--index", proxy.url, "--store", str(store))
        done = vpr(*args, cwd=tmp_path, env=env)
        assert done.returncode == 3, done.stderr
        assert "giving up on vpr_test_plugin-0.1.0-py3-none-any.whl after 3 attempts" in done.stderr
        assert "retrying" in done.stderr
        assert secret not in done.stdout + done.stderr
        assert not store.exists()
        # one good upload, then three refused attempts of ours (twine also retries inside each)
        assert proxy.posts >= 4
        assert done.stderr.count("retrying in") == 2
        # The index recovers: the first wheel counts as done, the second is uploaded.
        proxy.fail_after = 10**6
        done = vpr(*args, "--verify-install", "--json", cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["wheels"] == {
            "vllm-0.26.0+empty-py3-none-any.whl": "present",
            "vpr_test_plugin-0.1.0-py3-none-any.whl": "uploaded",
        }
        assert result["install_proven"] is True
        assert json.loads((store / "index.json").read_text())["pairings"]
    finally:
        proxy.close()


def test_index_down_is_exit_3(tmp_path: Path) -> None:
    spec = _project(tmp_path)
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://uploader:hunter2hunter2@127.0.0.1:{port}/"
    store = tmp_path / "store"
    done = vpr("publish", "--spec", str(spec), "--index", url, "--store", str(store),
               cwd=tmp_path, env=FAST_RETRY)  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "hunter2hunter2" not in done.stdout + done.stderr
    assert "unreachable" in done.stderr
    assert not store.exists()


def test_remote_sha256_against_real_pypiserver(tmp_path: Path, pypi: ix.IndexTarget) -> None:
    wheel = write_wheel(tmp_path, "vpr-probe", "1.0", {"vpr_probe/__init__.py": ""})
    wheels = [("vpr-probe", wheel, sha256_file(wheel))]
    assert ix.remote_sha256(pypi.simple_url, "vpr-probe", wheel.name) is None
    assert pub.ensure_on_index(pypi, wheels) == {wheel.name: "uploaded"}
    assert ix.remote_sha256(pypi.simple_url, "VPR_Probe", wheel.name) == sha256_file(wheel)
    assert pub.ensure_on_index(pypi, wheels) == {wheel.name: "present"}


def test_one_upload_for_the_absent_wheels_and_a_clash_uploads_nothing(
    tmp_path: Path, pypi: ix.IndexTarget
) -> None:
    """Every name is looked up before anything goes up: a clash on the second wheel leaves
    the first unpublished too. Then the absent ones go up together (one twine upload),
    and one already there with the same bytes is 'present'."""
    first = write_wheel(tmp_path / "a", "vpr-one", "1.0", {"vpr_one/__init__.py": ""})
    second = write_wheel(tmp_path / "a", "vpr-two", "1.0", {"vpr_two/__init__.py": ""})
    other = write_wheel(tmp_path / "b", "vpr-two", "1.0", {"vpr_two/__init__.py": "# other\n"})
    assert pub.ensure_on_index(pypi, [("vpr-two", other, sha256_file(other))]) == {
        other.name: "uploaded"
    }
    pair = [("vpr-one", first, sha256_file(first)), ("vpr-two", second, sha256_file(second))]
    with pytest.raises(GateFailed, match=f"{second.name} is already on the index"):
        pub.ensure_on_index(pypi, pair)
    assert ix.remote_sha256(pypi.simple_url, "vpr-one", first.name) is None  # nothing went up

    third = write_wheel(tmp_path / "a", "vpr-three", "1.0", {"vpr_three/__init__.py": ""})
    triple = [
        ("vpr-one", first, sha256_file(first)),
        ("vpr-two", other, sha256_file(other)),
        ("vpr-three", third, sha256_file(third)),
    ]
    assert pub.ensure_on_index(pypi, triple) == {
        first.name: "uploaded",
        other.name: "present",
        third.name: "uploaded",
    }
    for project, wheel, sha in triple:
        assert ix.remote_sha256(pypi.simple_url, project, wheel.name) == sha


def test_twine_check_started_ahead_is_taken_for_the_same_bytes_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`vpr release` starts publish's `twine check` once the wheels are built, at the
    lowest CPU priority. Publish takes that run's answer only for the very same files and
    bytes, and only once it has ended; otherwise it checks again now."""
    import os
    import signal

    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.edges import proc

    cache = Cache(tmp_path / ".vpr")
    wheel = write_wheel(tmp_path / "w", "vpr-probe", "1.0", {"vpr_probe/__init__.py": ""})
    good = sha256_file(wheel)

    held = proc.Ahead()  # the runs a walk started ahead

    def ahead() -> Any:
        pub.start_check_ahead(held, [(wheel, sha256_file(wheel))], cache)
        [started] = held.started()
        return started

    # A good wheel: the run ahead is taken, and it ran in the background.
    started = ahead()
    assert os.getpriority(os.PRIO_PROCESS, started.popen.pid) == 19
    started.popen.wait(120)
    pub._twine_check([("vpr-probe", wheel, good)], held)
    assert "twine check --strict (run while the pairing was checked)" in capsys.readouterr().err
    assert not held.started() and not list((cache.tmp).glob("twine-check-*"))

    # A broken description: the run ahead's failure is the gate.
    _break_description(wheel)
    broken = sha256_file(wheel)
    ahead().popen.wait(120)
    with pytest.raises(GateFailed, match="twine check --strict"):
        pub._twine_check([("vpr-probe", wheel, broken)], held)

    # The run ahead saw the broken bytes; the file was mended since: checked again, passes.
    ahead().popen.wait(120)
    write_wheel(tmp_path / "w", "vpr-probe", "1.0", {"vpr_probe/__init__.py": ""})
    assert sha256_file(wheel) == good
    capsys.readouterr()
    pub._twine_check([("vpr-probe", wheel, good)], held)
    assert "twine check --strict\n" in capsys.readouterr().err

    # A run ahead still going (held stopped here) is stopped and reaped; checked now.
    started = ahead()
    os.killpg(started.popen.pid, signal.SIGSTOP)
    pub._twine_check([("vpr-probe", wheel, good)], held)
    assert started.popen.returncode is not None
    assert "twine check --strict\n" in capsys.readouterr().err
    assert not held.started()

    # One nobody took (the release stopped before publish): stopped, reaped, swept.
    started = ahead()
    held.cancel()
    assert started.popen.returncode is not None and started.popen.pid not in proc._LIVE
    assert not held.started() and not list((cache.tmp).glob("twine-check-*"))


def test_work_started_ahead_belongs_to_the_walk_that_started_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second release walked in the same process (here from inside the first's publish
    stage) starts and stops its own `twine check`, and leaves the first's run alone: it
    is still held once the second walk has ended, and the first walk's end stops it. The
    other stages are stand-ins; the twine-check stage and its runs are real."""
    from types import SimpleNamespace

    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.edges import proc
    from vllm_plugin_release.flows import release as flow

    spec = load_spec(Path(__file__).resolve().parents[2] / "buildspec" / "reference.toml")
    wheel = write_wheel(tmp_path / "w", "vpr-probe", "1.0", {"vpr_probe/__init__.py": ""})
    built = SimpleNamespace(
        wheel=wheel,
        cached=False,
        data=SimpleNamespace(wheel=SimpleNamespace(sha256=sha256_file(wheel))),
    )
    runs: list[proc.Started] = []

    class Recorded(proc.Started):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            runs.append(self)

    def build(self: Any) -> None:
        self.built["build-core"] = built

    def scratch(opts: flow.Options) -> list[Path]:
        return sorted(opts.cache.tmp.glob("twine-check-*"))

    def options(name: str) -> flow.Options:
        cache = Cache(tmp_path / name)
        return flow.Options(cache=cache, dist_root=tmp_path / name / "dist", runtime_env=tmp_path)

    first, second = options("first"), options("second")
    seen: dict[str, Any] = {}

    def publish(self: Any) -> None:
        if self.opts is not first:
            return
        [mine] = runs
        seen["before"] = scratch(first)
        flow.release(spec, second)  # the second walk, while the first waits here
        seen["after"] = scratch(first)
        seen["second"] = (runs[1:], scratch(second))
        seen["mine"] = mine

    monkeypatch.setattr(proc, "Started", Recorded)
    for name in ("build_env", "lock_check", "build_plugin", "build_guard", "env", "conform",
                 "manifest", "ledger"):  # fmt: skip
        monkeypatch.setattr(flow._Stages, name, lambda self: None)
    monkeypatch.setattr(flow._Stages, "build_core", build)
    monkeypatch.setattr(flow._Stages, "publish", publish)
    flow.release(spec, first)

    assert len(seen["before"]) == 1 and seen["after"] == seen["before"]  # left alone
    [theirs], left = seen["second"]
    assert theirs.popen.returncode is not None and theirs.popen.pid not in proc._LIVE
    assert left == []  # the second walk's end stopped its own run and swept its folder
    mine = seen["mine"]  # the first walk's end stops its run (publish did not take it)
    assert mine.popen.returncode is not None and mine.popen.pid not in proc._LIVE
    assert scratch(first) == []


def test_an_index_failing_every_lookup_names_the_wheels_it_gave_up_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index answering 503 to every page: an outside failure after the retries that
    names every wheel not known to be on it (before, the first lookup's failure left
    the list empty: 'giving up on  after 3 attempts')."""
    from vllm_plugin_release.core.errors import OutsideFailure

    class Down(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Down)
    serve_in_thread(server)
    for name, value in FAST_RETRY.items():
        monkeypatch.setenv(name, value)
    one = write_wheel(tmp_path, "vpr-one", "1.0", {"vpr_one/__init__.py": ""})
    two = write_wheel(tmp_path, "vpr-two", "1.0", {"vpr_two/__init__.py": ""})
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    wheels = [("vpr-one", one, sha256_file(one)), ("vpr-two", two, sha256_file(two))]
    try:
        with pytest.raises(OutsideFailure, match=f"giving up on {one.name}, {two.name} after 3"):
            pub.ensure_on_index(ix.IndexTarget(url, url + "simple/"), wheels)
    finally:
        server.shutdown()
        server.server_close()


def test_an_index_holding_other_bytes_after_the_upload_says_so(
    tmp_path: Path, pypi: ix.IndexTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index lists another sha256 for the file just uploaded: a gate failure that says
    it happened after the upload (not that the file was there before)."""
    for name, value in FAST_RETRY.items():
        monkeypatch.setenv(name, value)
    proxy = FlakyProxy(pypi.upload_url, fail_after=10**6, lie_after_upload=True)
    wheel = write_wheel(tmp_path, "vpr-one", "1.0", {"vpr_one/__init__.py": ""})
    target = ix.IndexTarget(proxy.url, proxy.url + "simple/", local=True)  # twine's dummy user
    try:
        with pytest.raises(GateFailed, match=f"{wheel.name}: the index holds sha256 0{{64}} "
                           "after upload"):  # fmt: skip
            pub.ensure_on_index(target, [("vpr-one", wheel, sha256_file(wheel))])
        assert proxy.posts == 1
    finally:
        proxy.close()


def test_no_credentials_for_an_index_is_an_outside_failure_at_once(
    tmp_path: Path, pypi: ix.IndexTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """twine with no user name and no keyring entry (non-interactive): exit 3 at once with
    what to set, not retried as if the index were down."""
    from vllm_plugin_release.core.errors import OutsideFailure

    for name in ("TWINE_USERNAME", "TWINE_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.setenv("VPR_PUBLISH_ATTEMPTS", "3")
    monkeypatch.setenv("VPR_PUBLISH_BACKOFF", "30")  # a retry would take a minute
    wheel = write_wheel(tmp_path, "vpr-one", "1.0", {"vpr_one/__init__.py": ""})
    target = ix.IndexTarget(pypi.upload_url, pypi.simple_url)  # not marked local: no dummy user
    with pytest.raises(OutsideFailure, match="no credentials") as info:
        pub.ensure_on_index(target, [("vpr-one", wheel, sha256_file(wheel))])
    assert "TWINE_USERNAME" in info.value.hint
