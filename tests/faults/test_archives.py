"""Hostile source archives: link escapes (the CVE-2025-4517 class), special files and
archive bombs. Each is built in memory, served from the loopback index and refused with
exit 2 naming the archive and the member (or the limit), leaving nothing behind."""

from __future__ import annotations

import hashlib
import io
import re
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import Index, make_sdist, spec_head, vpr
from vllm_plugin_release.buildspec.model import SdistSource
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges.fetch import ArchiveLimits, Fetcher

FILENAME = "vllm-0.26.0.tar.gz"
TOP = "vllm-0.26.0"


@pytest.fixture
def index() -> Iterator[Index]:
    idx = Index()
    yield idx
    idx.close()


def tar(add: Callable[[tarfile.TarFile], None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        ok = tarfile.TarInfo(f"{TOP}/setup.py")
        ok.size = 2
        tf.addfile(ok, io.BytesIO(b"ok"))
        add(tf)
    return buf.getvalue()


def entry(tf: tarfile.TarFile, name: str, kind: bytes = tarfile.REGTYPE, **kw: object) -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    data = kw.pop("data", None)
    for key, value in kw.items():
        setattr(info, key, value)
    if isinstance(data, bytes):
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    else:
        tf.addfile(info)


# The work folder is <tmp>/.vpr/src/.<sha>.XXXX/: three levels under the test's tmp_path,
# where `victim` lives; every escape below aims there.
UP = "../../../"


def path_max_chain(tf: tarfile.TarFile, tail: Callable[[tarfile.TarFile, str], None]) -> None:
    """CVE-2025-4517: directories with long names, each reached through a one-letter
    symlink; a link through the chain whose physical path exceeds PATH_MAX (so realpath
    gives up) with '../' parts; then a link escaping through it."""
    long = "d" * 247
    steps = "abcdefghijklmnop"
    path = ""
    for step in steps:
        entry(tf, path + long, tarfile.DIRTYPE)
        entry(tf, path + step, tarfile.SYMTYPE, linkname=long)
        path += long + "/"
    deep = "/".join(steps) + "/" + "l" * 254
    entry(tf, deep, tarfile.SYMTYPE, linkname="../" * len(steps))
    entry(tf, "escape", tarfile.SYMTYPE, linkname=deep + "/" + UP.rstrip("/"))
    tail(tf, "escape")


def chain_file(tf: tarfile.TarFile, escape: str) -> None:
    entry(tf, f"{escape}/created", data=b"pwned")


def chain_hardlink(tf: tarfile.TarFile, escape: str) -> None:
    entry(tf, "hl", tarfile.LNKTYPE, linkname=f"{escape}/victim")
    entry(tf, "hl", data=b"pwned")


HOSTILE: dict[str, Callable[[tarfile.TarFile], None]] = {
    "symlink chain (PATH_MAX)": lambda tf: path_max_chain(tf, chain_file),
    "symlink chain + hardlink overwrite": lambda tf: path_max_chain(tf, chain_hardlink),
    "hardlink to outside": lambda tf: entry(
        tf, f"{TOP}/hl", tarfile.LNKTYPE, linkname=f"{TOP}/../{UP}victim"
    ),
    "hardlink overwrite": lambda tf: (
        entry(tf, f"{TOP}/hl", tarfile.LNKTYPE, linkname=f"{TOP}/../{UP}victim"),
        entry(tf, f"{TOP}/hl", data=b"pwned"),
    ),
    "absolute symlink": lambda tf: entry(tf, f"{TOP}/abs", tarfile.SYMTYPE, linkname="/etc"),
    "'..' symlink": lambda tf: entry(tf, f"{TOP}/up", tarfile.SYMTYPE, linkname=f"../{UP}"),
    "'..' symlink after './'": lambda tf: entry(
        tf, f"{TOP}/up", tarfile.SYMTYPE, linkname=f".//../{UP}"
    ),
    "link through link": lambda tf: (
        entry(tf, f"{TOP}/a", tarfile.SYMTYPE, linkname="b/../.."),
        entry(tf, f"{TOP}/b", tarfile.SYMTYPE, linkname="c/d/e"),
        entry(tf, f"{TOP}/c/d/e", tarfile.SYMTYPE, linkname=f"../../../{UP}"),
    ),
    "member under a symlink dir": lambda tf: (
        entry(tf, f"{TOP}/dir", tarfile.SYMTYPE, linkname="."),
        entry(tf, f"{TOP}/dir/created", data=b"pwned"),
    ),
    "symlink replaced mid-archive": lambda tf: (
        entry(tf, "s", tarfile.DIRTYPE),
        entry(tf, "p/q/r/t/u", tarfile.DIRTYPE),
        entry(tf, "b", tarfile.SYMTYPE, linkname="s"),
        entry(tf, "a", tarfile.SYMTYPE, linkname="b/../../../.."),
        entry(tf, "h", tarfile.LNKTYPE, linkname="a/victim"),
        entry(tf, "b", tarfile.SYMTYPE, linkname="p/q/r/t/u"),
        entry(tf, "h", data=b"pwned"),
    ),
    "device": lambda tf: entry(tf, f"{TOP}/dev", tarfile.CHRTYPE, devmajor=1, devminor=3),
    "fifo": lambda tf: entry(tf, f"{TOP}/fifo", tarfile.FIFOTYPE),
}


def serve(index: Index, data: bytes) -> SdistSource:
    index.files[FILENAME] = data
    return SdistSource(index=index.url, filename=FILENAME, sha256=hashlib.sha256(data).hexdigest())


def assert_nothing_left(tmp_path: Path, cache: Cache, src: SdistSource) -> None:
    assert not cache.src_dir(src.sha256).exists()
    assert [p.name for p in (cache.root / "src").iterdir()] == []  # work folder discarded
    assert (tmp_path / "victim").read_text() == "keep"
    assert not (tmp_path / "created").exists()


@pytest.mark.parametrize("variant", list(HOSTILE))
def test_hostile_tar_is_refused(tmp_path: Path, index: Index, variant: str) -> None:
    (tmp_path / "victim").write_text("keep")
    src = serve(index, tar(HOSTILE[variant]))
    cache = Cache(tmp_path / ".vpr")
    with pytest.raises(BadInput, match=re.escape(f"{FILENAME}: unsafe archive member '")) as caught:
        Fetcher(cache).source_tree(src, "vllm")
    assert "\n" not in caught.value.message
    assert_nothing_left(tmp_path, cache, src)


def test_symlink_chain_via_cli_exits_2(tmp_path: Path, index: Index) -> None:
    (tmp_path / "victim").write_text("keep")
    src = serve(index, tar(lambda tf: path_max_chain(tf, chain_hardlink)))
    spec = tmp_path / "spec.toml"
    head = spec_head(sha=src.sha256)
    spec.write_text(head.replace('kind = "sdist"', f'kind = "sdist"\nindex = "{index.url}"'))
    done = vpr("fetch", "--spec", str(spec), "--cache-dir", str(tmp_path / ".vpr"), check=False)
    assert done.returncode == 2, done.stderr
    assert f"error {FILENAME}: unsafe archive member 'a/" in done.stderr
    assert "Traceback" not in done.stderr
    assert (tmp_path / "victim").read_text() == "keep"


# -- limits ----------------------------------------------------------------------------


def many_members(tf: tarfile.TarFile) -> None:
    for i in range(60):
        entry(tf, f"{TOP}/f{i}", data=b"x")


def big_total(tf: tarfile.TarFile) -> None:
    for i in range(5):
        entry(tf, f"{TOP}/f{i}", data=b"x" * 400)


def big_file(tf: tarfile.TarFile) -> None:
    entry(tf, f"{TOP}/big", data=b"x" * 5000)


SMALL = ArchiveLimits(max_members=50, max_total_bytes=1500, max_file_bytes=1000)
BOMBS = {
    "huge member count": (many_members, "max_members"),
    "huge total": (big_total, "max_total_bytes"),
    "huge single file": (big_file, "max_file_bytes"),
}


@pytest.mark.parametrize("variant", list(BOMBS))
def test_tar_over_a_limit_is_refused(tmp_path: Path, index: Index, variant: str) -> None:
    (tmp_path / "victim").write_text("keep")
    add, key = BOMBS[variant]
    src = serve(index, tar(add))
    cache = Cache(tmp_path / ".vpr")
    with pytest.raises(
        BadInput, match=re.escape(f"{FILENAME}: archive exceeds the limit")
    ) as caught:
        Fetcher(cache, SMALL).source_tree(src, "vllm")
    assert f"raise [fetch] {key} in the spec" in str(caught.value)
    assert_nothing_left(tmp_path, cache, src)


def test_limit_from_the_spec_via_cli(tmp_path: Path, index: Index) -> None:
    src = serve(index, tar(many_members))
    spec = tmp_path / "spec.toml"
    head = spec_head(sha=src.sha256)
    head = head.replace('kind = "sdist"', f'kind = "sdist"\nindex = "{index.url}"')
    spec.write_text(head + "\n[fetch]\nmax_members = 50\n")
    done = vpr("fetch", "--spec", str(spec), "--cache-dir", str(tmp_path / ".vpr"), check=False)
    assert done.returncode == 2, done.stderr
    assert f"{FILENAME}: archive exceeds the limit of 50 members" in done.stderr
    assert "[fetch] max_members" in done.stderr
    spec.write_text(head + "\n[fetch]\nmax_members = 100\n")
    vpr("fetch", "--spec", str(spec), "--cache-dir", str(tmp_path / ".vpr"))


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def serve_zip(index: Index, data: bytes) -> SdistSource:
    index.files["vllm-0.26.0.zip"] = data
    return SdistSource(
        index=index.url, filename="vllm-0.26.0.zip", sha256=hashlib.sha256(data).hexdigest()
    )


def lying_zip(real: bytes, claimed: int) -> bytes:
    """One deflated member whose headers (local and central) claim `claimed` bytes."""
    data = bytearray(zip_bytes({f"{TOP}/big": real}))
    struct.pack_into("<I", data, 22, claimed)  # local header: uncompressed size
    struct.pack_into("<I", data, data.index(b"PK\x01\x02") + 24, claimed)  # central
    return bytes(data)


def zip_link(name: str, target: str) -> bytes:
    """A zip whose member `name` is a symlink to `target` (as Info-ZIP stores one: the
    mode in the external attributes, the target as the data)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{TOP}/setup.py", b"ok")
        info = zipfile.ZipInfo(name)
        info.create_system = 3  # Unix
        info.external_attr = (0o120777 << 16) | 0x20
        zf.writestr(info, target.encode())
    return buf.getvalue()


HOSTILE_ZIPS = {
    "zip: huge member count": (
        zip_bytes({f"{TOP}/f{i}": b"x" for i in range(60)}),
        "archive exceeds the limit",
        "[fetch] max_members",
    ),
    "zip: huge total": (
        zip_bytes({f"{TOP}/f{i}": b"x" * 400 for i in range(5)}),
        "archive exceeds the limit",
        "[fetch] max_total",
    ),
    "zip: huge single file": (
        zip_bytes({f"{TOP}/big": b"x" * 5000}),
        "archive exceeds the limit",
        "[fetch] max_file_bytes",
    ),
    # each kills a mutation: without the '..' check this writes `created` beside the
    # victim; without the link refusal the next extracts (as a plain file)
    "zip: '..' member": (
        zip_bytes({f"{TOP}/setup.py": b"ok", f"{UP}created": b"pwned"}),
        "unsafe archive member",
        "'..'",
    ),
    "zip: symlink member": (
        zip_link(f"{TOP}/escape", f"../{UP}victim"),
        "unsafe archive member",
        "(link)",
    ),
}


@pytest.mark.parametrize("variant", list(HOSTILE_ZIPS))
def test_hostile_zip_is_refused(tmp_path: Path, index: Index, variant: str) -> None:
    (tmp_path / "victim").write_text("keep")
    data, refusal, why = HOSTILE_ZIPS[variant]
    src = serve_zip(index, data)
    cache = Cache(tmp_path / ".vpr")
    with pytest.raises(BadInput, match=re.escape(f"vllm-0.26.0.zip: {refusal}")) as caught:
        Fetcher(cache, SMALL).source_tree(src, "vllm")
    assert why in str(caught.value)
    assert_nothing_left(tmp_path, cache, src)


def test_lying_headers_are_refused(tmp_path: Path, index: Index) -> None:
    """Tar: a header claiming 1 GiB over a few bytes is refused from the header, before
    writing. Zip: headers claiming 10 bytes over 5,000 are refused (zipfile stops at the
    claimed size and the CRC fails); nothing is kept either way."""
    (tmp_path / "victim").write_text("keep")
    cache = Cache(tmp_path / ".vpr")
    raw = bytearray(tar(lambda tf: entry(tf, f"{TOP}/big", data=b"x" * 10)))
    raw = bytearray(zlib.decompress(bytes(raw), wbits=31))
    at = raw.index(f"{TOP}/big".encode())
    raw[at + 124 : at + 136] = b"%011o\0" % (1 << 30)  # size field: 1 GiB
    raw[at + 148 : at + 156] = b" " * 8
    raw[at + 148 : at + 155] = b"%06o\0" % sum(raw[at : at + 512])
    src = serve(index, bytes(raw))
    with pytest.raises(BadInput, match="limit of 1000 bytes in one file at member"):
        Fetcher(cache, SMALL).source_tree(src, "vllm")
    assert_nothing_left(tmp_path, cache, src)
    data = lying_zip(b"x" * 5000, 10)
    src = serve_zip(index, data)
    with pytest.raises(BadInput, match=re.escape("vllm-0.26.0.zip: ")):
        Fetcher(cache, SMALL).source_tree(src, "vllm")
    assert_nothing_left(tmp_path, cache, src)


def test_zip_bytes_are_counted_while_writing(tmp_path: Path) -> None:
    """Should a reader yield more than the header claims, the count of bytes written stops it."""
    from vllm_plugin_release.edges import fetch

    archive = tmp_path / "vllm-0.26.0.zip"
    archive.write_bytes(zip_bytes({f"{TOP}/big": b"x" * 10}))
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(zipfile.ZipFile, "open", lambda self, info: io.BytesIO(b"x" * 5000))
        with pytest.raises(BadInput, match="limit of 1000 bytes in one file"):
            fetch.extract(archive, dest, SMALL)


# -- good archives still extract -------------------------------------------------------


def test_good_archive_with_inner_links_extracts(tmp_path: Path, index: Index) -> None:
    def add(tf: tarfile.TarFile) -> None:
        entry(tf, f"{TOP}/pkg/mod.py", data=b"x = 1\n")
        entry(tf, f"{TOP}/pkg/alias.py", tarfile.SYMTYPE, linkname="mod.py")
        entry(tf, f"{TOP}/docs", tarfile.SYMTYPE, linkname="pkg/../pkg")
        entry(tf, f"{TOP}/copy.py", tarfile.LNKTYPE, linkname=f"{TOP}/pkg/mod.py")

    src = serve(index, tar(add))
    tree = Fetcher(Cache(tmp_path / ".vpr")).source_tree(src, "vllm")
    assert tree.name == TOP
    assert (tree / "pkg" / "alias.py").read_text() == "x = 1\n"
    assert (tree / "copy.py").read_text() == "x = 1\n"
    assert (tree / "docs" / "mod.py").exists()


def _chain(tf: tarfile.TarFile, links: int) -> None:
    """`links` symlinks, each to the next, the last to a file: resolving the first takes
    links - 1 hops through the others."""
    for i in range(links):
        entry(tf, f"{TOP}/h{i}", tarfile.SYMTYPE, linkname=f"h{i + 1}")
    entry(tf, f"{TOP}/h{links}", data=b"end")


def test_links_through_links_resolve_as_the_kernel_would(tmp_path: Path, index: Index) -> None:
    """Inner links followed through other links and '..' from a subfolder extract; as many
    hops as the kernel follows (40) extract, one more is refused, as a loop is."""

    def add(tf: tarfile.TarFile) -> None:
        entry(tf, f"{TOP}/pkg/mod.py", data=b"x = 1\n")
        entry(tf, f"{TOP}/pkg/sub/up.py", tarfile.SYMTYPE, linkname="../mod.py")
        entry(tf, f"{TOP}/lib", tarfile.SYMTYPE, linkname="pkg")
        entry(tf, f"{TOP}/via.py", tarfile.SYMTYPE, linkname="lib/sub/up.py")
        _chain(tf, 41)

    tree = Fetcher(Cache(tmp_path / ".vpr")).source_tree(serve(index, tar(add)), "vllm")
    assert (tree / "via.py").read_text() == "x = 1\n"
    for name, hostile in {
        "one hop too many": lambda tf: _chain(tf, 42),
        "loop": lambda tf: (
            entry(tf, f"{TOP}/a", tarfile.SYMTYPE, linkname="b"),
            entry(tf, f"{TOP}/b", tarfile.SYMTYPE, linkname="a"),
        ),
    }.items():
        index.files.clear()
        cache = Cache(tmp_path / name)
        with pytest.raises(BadInput, match="loops or is absolute"):
            Fetcher(cache).source_tree(serve(index, tar(hostile)), "vllm")


@pytest.mark.parametrize("target", ["/etc", "\\etc"])
def test_an_absolute_link_is_refused_before_anything_is_written(
    tmp_path: Path, index: Index, target: str
) -> None:
    src = serve(index, tar(lambda tf: entry(tf, f"{TOP}/abs", tarfile.SYMTYPE, linkname=target)))
    with pytest.raises(BadInput, match="absolute symlink target"):
        Fetcher(Cache(tmp_path / ".vpr")).source_tree(src, "vllm")


@pytest.mark.parametrize("name", ["\\evil.py", "c:evil.py"])
def test_a_member_named_as_a_windows_path_is_refused(
    tmp_path: Path, index: Index, name: str
) -> None:
    for i, data in enumerate((tar(lambda tf: entry(tf, name, data=b"x")), zip_bytes({name: b"x"}))):
        src = serve(index, data) if i == 0 else serve_zip(index, data)
        with pytest.raises(BadInput, match="unsafe archive member"):
            Fetcher(Cache(tmp_path / f"c{i}")).source_tree(src, "vllm")


def test_extracted_modes_follow_the_data_filter(tmp_path: Path, index: Index) -> None:
    """Modes as tarfile's `data` filter sets them: executables stay executable, nothing is
    setuid or writable by group or others, the owner can always read and write."""
    modes = {"run.sh": 0o755, "plain.py": 0o644, "open.py": 0o777, "suid": 0o4755, "ro": 0o400}

    def add(tf: tarfile.TarFile) -> None:
        for name, mode in modes.items():
            entry(tf, f"{TOP}/{name}", data=b"x", mode=mode)

    tree = Fetcher(Cache(tmp_path / ".vpr")).source_tree(serve(index, tar(add)), "vllm")
    got = {name: (tree / name).stat().st_mode & 0o7777 for name in modes}
    assert got == {"run.sh": 0o755, "plain.py": 0o644, "open.py": 0o755, "suid": 0o755, "ro": 0o600}


@pytest.mark.timeout(60)  # a realpath per member (O(N^3)) ends here
def test_very_deep_archive_extracts(deep_tmp: Path, index: Index) -> None:
    """A source tree 1,800 folders deep: checked, extracted and its manifest written, each
    step linear in the archive's names."""
    depth = 1800

    def add(tf: tarfile.TarFile) -> None:
        path = TOP
        for _ in range(depth):
            path += "/d"
            entry(tf, path, tarfile.DIRTYPE)
        entry(tf, path + "/deep.py", data=b"x = 1\n")

    src = serve(index, tar(add))
    tree = Fetcher(Cache(deep_tmp / ".vpr")).source_tree(src, "vllm")
    assert (tree.joinpath(*["d"] * depth) / "deep.py").read_text() == "x = 1\n"


def test_good_zip_extracts_and_default_limits_fit_a_real_sdist(tmp_path: Path) -> None:
    from vllm_plugin_release.edges.fetch import extract

    archive = tmp_path / "vllm-0.26.0.zip"
    members = [
        f"{TOP}/docs/api/",  # a folder entry before its parent's
        f"{TOP}/docs/",
        f"{TOP}/setup.py",
        f"{TOP}/pkg/sub/a.py",  # no folder entries: made as needed
        f"{TOP}/pkg/sub/b.py",
    ]
    with zipfile.ZipFile(archive, "w") as zf:
        for name in members:
            zf.writestr(name, b"" if name.endswith("/") else name[-4:-3].encode())
    extract(archive, tmp_path / "out")
    top = tmp_path / "out" / TOP
    assert [(top / "pkg" / "sub" / n).read_text() for n in ("a.py", "b.py")] == ["a", "b"]
    assert (top / "docs" / "api").is_dir() and (top / "setup.py").read_text() == "p"
    limits = ArchiveLimits()
    assert limits.max_members >= 10 * 6000 and limits.max_total_bytes >= 50 * 30 * 10**6
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(make_sdist({f"f{i}": b"x" for i in range(200)}))
    extract(archive, tmp_path / "out2")
    assert len(list((tmp_path / "out2" / "vllm-0.0.1").iterdir())) == 200
