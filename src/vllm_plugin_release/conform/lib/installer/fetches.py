"""What an installer fetches: curl / wget downloads, git clones, and the checks that verify them."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from vllm_plugin_release.conform.lib.installer.report import HEX40, CoreFindings, PinningReport
from vllm_plugin_release.conform.lib.requirements import names
from vllm_plugin_release.conform.lib.shell import ShellCommand

_HASHERS = names("sha256sum sha512sum sha384sum sha224sum sha1sum shasum b2sum md5sum")
_CURL_VALUES = set("oHdueAxmwKXTbcEr")  # short options that take a value
_WGET_VALUES = set("OoPaitTwUeBlQ")
_LONG_VALUES = names(
    "--output --output-document --header --data --user --retry --max-time "
    "--connect-timeout --user-agent --write-out --request --cacert --directory-prefix "
    "--output-dir --referer --proxy --config --tries --timeout"
)
# Downloads, clones and hash checks judged, each kind: a real installer has a few; past it
# the analysis says it is incomplete (each is compared with the others: kept small).
MAX_FETCHES = 1000
_CLONE_VALUE_OPTS = (
    "--depth",
    "-o",
    "--origin",
    "-j",
    "--jobs",
    "--reference",
    "--filter",
    "-c",
    "--config",
    "--separate-git-dir",
    "-u",
    "--template",
    "--shallow-since",
)


class Fetches:
    """Downloads and clones in command order; unhashed ones go to the report when finished."""

    def __init__(self, report: PinningReport, core: CoreFindings) -> None:
        self.report = report
        self.core = core
        self.clones: list[dict[str, Any]] = []
        self.downloads: list[dict[str, Any]] = []
        self.verified_words: list[tuple[int, str, list[str]]] = []  # (order, file, words)
        self.order = 0  # the number of the command being read
        # lookups by key, not by a scan of every fetch so far per command
        self._pending: list[dict[str, Any]] = []  # downloads not yet judged
        self._by_cmd: dict[int, list[dict[str, Any]]] = {}  # id(command) -> its downloads
        self._by_output: dict[str, dict[str, Any]] = {}  # output file -> first download
        self._first_clone: dict[str, dict[str, Any]] = {}  # folder -> first clone there
        self._last_clone: dict[str, dict[str, Any]] = {}  # folder -> last clone there
        self._over = False

    def _room(self, kind: list[Any], cmd: ShellCommand) -> bool:
        """Whether one more download, clone or hash check is judged; past MAX_FETCHES of
        one kind the rest are not, and the analysis says it is incomplete (once)."""
        if len(kind) < MAX_FETCHES:
            return True
        if not self._over:
            self._over = True
            self.report.incomplete.append(
                f"{cmd.file}:{cmd.line}: more than {MAX_FETCHES} downloads, clones or hash "
                "checks; the rest are not judged"
            )
        return False

    # -- downloads -------------------------------------------------------------
    def download(self, cmd: ShellCommand, tool: str) -> None:
        urls, output, remote_name = _download_args(cmd.argv[1:], tool)
        if output is None and cmd.stdout is not None:
            output = cmd.stdout  # curl URL > file
        for url in urls:
            if not self._room(self.downloads, cmd):
                return
            out = output
            if out is None and (remote_name or tool == "wget"):
                out = PurePosixPath(url.split("?")[0]).name
            dl = {
                "url": url,
                "output": out,
                "file": cmd.file,
                "line": cmd.line,
                "tool": tool,
                "_order": self.order,
                "_cmd": cmd,
            }
            self.downloads.append(dl)
            self._pending.append(dl)
            self._by_cmd.setdefault(id(cmd), []).append(dl)
            if out:
                self._by_output.setdefault(out, dl)
            self.core.vllm_url(url, cmd.file, cmd.line)

    def piped(self, previous: ShellCommand, cmd: ShellCommand) -> None:
        """`previous | cmd`: a download of `previous` is fed to `cmd`."""
        for dl in self._by_cmd.get(id(previous), []):
            dl["piped_to"] = PurePosixPath(cmd.argv[0]).name

    def verification(self, cmd: ShellCommand, pipeline: list[ShellCommand]) -> None:
        """Remember the words of a hash or signature check (they name the files checked)."""
        argv = cmd.argv
        name = PurePosixPath(argv[0]).name
        if name in _HASHERS and any(
            a in ("-c", "--check") or (a.startswith("-") and not a.startswith("--") and "c" in a)
            for a in argv[1:]
        ):
            if not self._room(self.verified_words, cmd):
                return
            words = [w for c in pipeline for w in c.argv] + [
                h for c in pipeline for h in c.heredocs
            ]
            self.verified_words.append((self.order, cmd.file, words))
        elif _signature_check(name, argv) and self._room(self.verified_words, cmd):
            self.verified_words.append((self.order, cmd.file, list(argv)))

    def finish_downloads(self) -> None:
        pending, self._pending = self._pending, []
        for dl in pending:
            if dl.get("_done"):
                continue
            dl["_done"] = True
            hashed = self.verified(dl)
            if not hashed:
                entry = {k: v for k, v in dl.items() if not k.startswith("_") and v is not None}
                entry["kind"] = "download"
                entry["note"] = (
                    f"piped into {dl['piped_to']} without a hash check"
                    if dl.get("piped_to")
                    else "downloaded without a hash check (no sha256sum -c / gpg --verify "
                    "of the file afterwards)"
                )
                self.report.unhashed_fetches.append(entry)
            dl["hashed"] = hashed

    def verified(self, dl: dict[str, Any]) -> bool:
        """A later check in the same file names the downloaded file."""
        out = dl.get("output")
        needles = [n for n in (out, PurePosixPath(out).name if out else None) if n]
        for order, file, words in self.verified_words:
            if order <= dl["_order"] or file != dl["file"]:
                continue
            if any(n in w for n in needles for w in words):
                return True
        return False

    def download_for(self, path: str) -> dict[str, Any] | None:
        return self._by_output.get(path) if path else None

    # -- git -------------------------------------------------------------------
    def git(self, cmd: ShellCommand) -> None:
        argv, cwd = _git_global_options(cmd.argv[1:], cmd.cwd)
        if not argv:
            return
        sub, args = argv[0], argv[1:]
        if sub == "clone":
            self.clone(cmd, args, cwd)
        elif sub in ("checkout", "switch", "reset"):
            refs = [a for a in args if not a.startswith("-")]
            if not refs:
                return
            if cwd is not None:
                clone = self._last_clone.get(_norm(cwd))
            else:
                clone = self.clones[-1] if self.clones else None
            if clone is not None:
                clone["ref"] = refs[-1]
                clone["line_ref"] = cmd.line

    def clone(self, cmd: ShellCommand, args: list[str], cwd: str | None) -> None:
        ref, positional = _clone_args(args)
        if not positional:
            return
        url = positional[0]
        directory = (
            positional[1]
            if len(positional) > 1
            else PurePosixPath(url.rstrip("/")).name.removesuffix(".git")
        )
        if cwd and not directory.startswith("/"):
            directory = str(PurePosixPath(cwd) / directory)
        if not self._room(self.clones, cmd):
            return
        clone = {"url": url, "ref": ref, "dir": directory, "file": cmd.file, "line": cmd.line}
        self.clones.append(clone)
        self._first_clone.setdefault(_norm(directory), clone)
        self._last_clone[_norm(directory)] = clone

    def finish_clones(self) -> None:
        for clone in self.clones:
            ref = clone.get("ref")
            if ref and HEX40.match(ref):
                continue
            self.report.unhashed_fetches.append(
                {
                    "url": clone["url"],
                    "file": clone["file"],
                    "line": clone["line"],
                    "tool": "git",
                    "kind": "git-ref",
                    "ref": ref,
                    "note": f"git ref {ref!r} is a tag or branch, not a commit"
                    if ref
                    else "cloned at the default branch",
                }
            )

    def clone_for(self, path: str, cwd: str | None) -> dict[str, Any] | None:
        full = path if not cwd or path.startswith("/") else str(PurePosixPath(cwd) / path)
        found = [self._first_clone.get(_norm(p)) for p in (full, path)]
        found = [c for c in found if c is not None]
        return min(found, key=self.clones.index) if len(found) > 1 else next(iter(found), None)


def _download_args(argv: list[str], tool: str) -> tuple[list[str], str | None, bool]:
    """curl / wget arguments: (URLs, the output file if named, whether -O names it remotely)."""
    urls: list[str] = []
    output: str | None = None
    remote_name = False
    values = _CURL_VALUES if tool == "curl" else _WGET_VALUES
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word.startswith("--"):
            opt, eq, value = word.partition("=")
            if opt in _LONG_VALUES and not eq and i < len(argv):
                value = argv[i]
                i += 1
            if opt in ("--output", "--output-document"):
                output = value
            elif opt == "--remote-name":
                remote_name = True
            continue
        if word.startswith("-") and len(word) > 1:
            for k, ch in enumerate(word[1:], start=1):
                if ch in values:
                    value = word[k + 1 :]
                    if not value and i < len(argv):
                        value = argv[i]
                        i += 1
                    if (tool == "curl" and ch == "o") or (tool == "wget" and ch == "O"):
                        output = value
                    break
                if tool == "curl" and ch == "O":
                    remote_name = True
            continue
        urls.append(word)
    return urls, output, remote_name


def _git_global_options(argv: list[str], cwd: str | None) -> tuple[list[str], str | None]:
    """Skip `git -C DIR -c KEY=VALUE ...`: the subcommand's words and the directory it runs in."""
    argv = list(argv)
    while argv and argv[0].startswith("-"):
        opt = argv.pop(0)
        if opt == "-C" and argv:
            cwd = argv.pop(0)
        elif opt == "-c" and argv:
            argv.pop(0)
    return argv, cwd


def _clone_args(args: list[str]) -> tuple[str | None, list[str]]:
    """`git clone` arguments: (the --branch ref if any, the positional words)."""
    ref = None
    positional: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word in ("-b", "--branch") and i < len(args):
            ref = args[i]
            i += 1
        elif word.startswith("--branch="):
            ref = word.split("=", 1)[1]
        elif word in _CLONE_VALUE_OPTS and i < len(args):
            i += 1
        elif not word.startswith("-"):
            positional.append(word)
    return ref, positional


def _signature_check(name: str, argv: list[str]) -> bool:
    """gpg --verify, gpgv, cosign verify-blob, minisign -V."""
    return (name in ("gpg", "gpgv") and ("--verify" in argv or name == "gpgv")) or (
        name in ("cosign", "minisign") and any(a in ("verify-blob", "-V") for a in argv)
    )


def _norm(folder: str) -> str:
    """A folder as two commands that name it the same way would (`a/`, `./a`: `a`)."""
    return str(PurePosixPath(folder.rstrip("/") or "/")).removeprefix("./")
