"""A simple-index project page (PEP 691 JSON, PEP 503 HTML) read into one shape, checked
before anyone reads it: a body of another shape is an outside failure naming the URL."""

from __future__ import annotations

import html.parser
import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

from vllm_plugin_release.core.errors import OutsideFailure


@dataclass(frozen=True)
class IndexFile:
    """One file of a project page (PEP 691 JSON or PEP 503 HTML)."""

    filename: str
    url: str  # absolute, no fragment
    sha256: str | None
    size: int | None = None
    upload_time: str | None = None
    yanked: bool = False


def json_files(body: bytes, url: str) -> list[dict[str, Any]]:
    """The `files` entries of a PEP 691 page, each with a string `filename` and `url`."""

    def bad(what: str) -> OutsideFailure:
        return OutsideFailure(
            f"{url}: malformed PEP 691 index page ({what})",
            hint="check the [core.source] index URL; the index must serve the simple API",
        )

    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8
        raise bad(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise bad("not a JSON object")
    files = data.get("files", [])
    if not isinstance(files, list):
        raise bad("'files' is not a list")
    for number, entry in enumerate(files):
        if not isinstance(entry, dict):
            raise bad(f"files[{number}] is not an object")
        for key in ("filename", "url"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise bad(f"files[{number}] has no {key!r}")
        if not isinstance(entry.get("hashes", {}), dict):
            raise bad(f"files[{number}]: 'hashes' is not an object")
        if not isinstance(entry.get("upload-time"), str | None):
            raise bad(f"files[{number}]: 'upload-time' is not text")
    return files


# The Accept header of a project page request: PEP 691 JSON preferred, PEP 503 HTML accepted.
ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


class _Anchors(html.parser.HTMLParser):
    """(href, text, data-yanked present) of every <a> of a PEP 503 page."""

    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[tuple[str, str, bool]] = []
        self._open: tuple[str, bool] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            href = found.get("href")
            self._open = (href, "data-yanked" in found) if href else None
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.anchors.append((self._open[0], "".join(self._text).strip(), self._open[1]))
            self._open = None


def page_files(body: bytes, content_type: str, base: str, where: str) -> list[IndexFile]:
    """The files of a project page, JSON (PEP 691) or HTML (PEP 503), one shape for both:
    filename, url (absolute, no fragment), sha256 (or None), size, upload_time, yanked.
    `base` resolves relative links; `where` names the page in errors (no credentials)."""
    files: list[IndexFile] = []
    if "json" in content_type:
        for f in json_files(body, where):
            sha = (f.get("hashes") or {}).get("sha256")
            files.append(
                IndexFile(
                    filename=f["filename"],
                    url=urllib.parse.urljoin(base, f["url"]).split("#")[0],
                    sha256=sha if isinstance(sha, str) else None,
                    size=f.get("size") if isinstance(f.get("size"), int) else None,
                    upload_time=f.get("upload-time"),
                    yanked=bool(f.get("yanked")),
                )
            )
        return files
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    for href, text, yanked in parser.anchors:
        full = urllib.parse.urljoin(base, href)
        parts = urllib.parse.urlsplit(full)
        frag = parts.fragment
        name = text or urllib.parse.unquote(parts.path.rsplit("/", 1)[-1])
        files.append(
            IndexFile(
                filename=name,
                url=full.split("#")[0],
                sha256=frag.split("=", 1)[1] if frag.startswith("sha256=") else None,
                yanked=yanked,
            )
        )
    return files
