"""Load a page of the compatibility site in headless Chromium (Debian's `chromium`) at a
given width, and report what the browser saw: a screenshot, the text of every matrix
cell, where the matrix is and whether it is visible, and whether the page scrolls
sideways. The browser is driven through the DevTools protocol over a pipe
(`--remote-debugging-pipe`, standard library only); the page itself runs no script.

    python scripts/sitecheck.py SITE_DIR [-o SHOTS_DIR] [--widths 390,1280]

writes SHOTS_DIR/index-390.png, index-1280.png (the first screen) and their full-page
versions (and PLUGIN-390.png ... for each plugin's page across every core, plugins/), and
sitecheck.json (what was measured). Exit 0 when at every width the matrix
is visible and the page does not scroll sideways; 1 when it does not hold; 2 when the
site is missing; 3 when no browser is found or it fails.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshot import find_browser

HEIGHTS = {390: 844, 1280: 800}  # a phone's screen, a laptop's
MEASURE = """(() => {
  const root = document.documentElement, t = document.getElementById('matrix');
  const r = t ? t.getBoundingClientRect() : null, s = t ? getComputedStyle(t) : null;
  return {
    viewport: root.clientWidth, scroll_width: root.scrollWidth, height: root.scrollHeight,
    scripts: document.scripts.length, text: document.body.innerText,
    resources: performance.getEntriesByType('resource').map(x => x.name),
    matrix: t && {left: r.left, right: r.right, top: r.top, width: r.width, height: r.height,
                  visible: s.display !== 'none' && s.visibility === 'visible' &&
                           r.width > 0 && r.height > 0},
    rows: t ? [...t.querySelectorAll('tbody tr')].map(
      tr => [...tr.children].map(c => ({tag: c.tagName.toLowerCase(),
                                        scope: c.getAttribute('scope'), text: c.innerText}))) : [],
    headers: t ? [...t.querySelectorAll('thead th')].map(
      th => ({scope: th.getAttribute('scope'), text: th.innerText})) : [],
  };
})()"""


class Browser:
    """One headless Chromium, driven over --remote-debugging-pipe (fds 3 and 4)."""

    def __init__(self, browser: str) -> None:
        self.profile = tempfile.TemporaryDirectory(prefix="vpr-sitecheck-")
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()

        def fds() -> None:  # the browser reads commands on fd 3 and answers on fd 4
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        self.proc = subprocess.Popen(
            [
                browser,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--remote-debugging-pipe",
                f"--user-data-dir={self.profile.name}",
                "about:blank",
            ],
            pass_fds=(3, 4),
            preexec_fn=fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._next, self._buffer, self.session = 0, b"", None
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.call("Page.enable")

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise RuntimeError("the browser did not answer within 60 s")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError(f"the browser exited ({self.proc.poll()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(line)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self._send(method, params, wait_for=None)

    def _send(self, method: str, params: dict[str, Any], wait_for: str | None) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline, answer, seen = time.monotonic() + 60, None, wait_for is None
        while answer is None or not seen:
            got = self._message(deadline)
            if got.get("id") == self._next:
                if "error" in got:
                    raise RuntimeError(f"{method}: {got['error'].get('message')}")
                answer = got.get("result", {})
            elif got.get("method") == wait_for:
                seen = True
        return answer

    def load(self, page: Path, width: int, height: int) -> None:
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=width < 600,
        )
        self._send("Page.navigate", {"url": page.resolve().as_uri()}, "Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def screenshot(self, out: Path, *, full: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full:
            size = self.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
            )
            params.update(
                captureBeyondViewport=True,
                clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1},
            )
        data = self.call("Page.captureScreenshot", **params)["data"]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(data))
        return out

    def close(self) -> None:
        try:
            os.close(self._write)
            self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self._read)
            self.profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def inspect(page: Path, width: int, shots: Path | None = None, browser: str | None = None):
    """What Chromium saw of `page` at `width`: MEASURE's answer, and the screenshots."""
    path = browser or find_browser()
    if path is None:
        raise RuntimeError("no Chromium found; apt-get install -y chromium (or set $CHROMIUM)")
    with Browser(path) as b:
        b.load(page, width, HEIGHTS.get(width, 900))
        seen = b.evaluate(MEASURE)
        if shots is not None:
            stem = f"{page.stem}-{width}"
            seen["screenshot"] = str(b.screenshot(shots / f"{stem}.png"))
            seen["full_page"] = str(b.screenshot(shots / f"{stem}-full.png", full=True))
    return seen


def problems(seen: dict[str, Any], *, matrix_page: bool = True) -> list[str]:
    """What does not hold: a visible matrix inside the viewport (on the matrix's page), no
    sideways scroll, no script, nothing loaded from outside the site's folder."""
    out = []
    matrix = seen.get("matrix")
    if not matrix_page:
        matrix = None
    elif not matrix or not matrix["visible"]:
        out.append("the matrix is not visible")
        matrix = None
    if matrix and (matrix["right"] > seen["viewport"] + 0.5 or matrix["left"] < -0.5):
        out.append(
            f"the matrix ({matrix['left']:.0f}-{matrix['right']:.0f} px) does not fit "
            f"the {seen['viewport']} px viewport"
        )
    if seen["scroll_width"] > seen["viewport"]:
        out.append(f"the page scrolls sideways ({seen['scroll_width']} px in {seen['viewport']})")
    if seen["scripts"]:
        out.append(f"the page holds {seen['scripts']} script element(s)")
    outside = [r for r in seen["resources"] if not r.startswith("file:")]
    if outside:
        out.append(f"the page loads from outside its folder: {', '.join(outside)}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("site", help="the site's folder (vpr manifest site --out)")
    parser.add_argument(
        "-o", "--out", default=None, help="screenshots folder (default: SITE/shots)"
    )
    parser.add_argument("--widths", default="390,1280")
    args = parser.parse_args(argv)
    page = Path(args.site) / "index.html"
    if not page.is_file():
        print(f"sitecheck: {page}: not found; run `vpr manifest site` first", file=sys.stderr)
        return 2
    shots = Path(args.out) if args.out else Path(args.site) / "shots"
    report: dict[str, Any] = {}
    failed = False
    # the matrix, then each plugin's page across every core (a matrix table too)
    pages = [page, *sorted((Path(args.site) / "plugins").glob("*.html"))]
    for width in (int(w) for w in args.widths.split(",")):
        for one in pages:
            try:
                seen = inspect(one, width, shots)
            except (RuntimeError, OSError) as exc:
                print(f"sitecheck: {exc}", file=sys.stderr)
                return 3
            found = problems(seen)
            failed |= bool(found)
            kept = {k: v for k, v in seen.items() if k not in ("rows", "text")}
            name = "" if one == page else f"plugins/{one.name} "
            report[f"{name}{width}"] = kept | {"problems": found}
            print(
                f"{name}{width} px: "
                + ("; ".join(found) or "matrix visible, no sideways scroll")
                + f" ({seen['screenshot']})"
            )
    shots.mkdir(parents=True, exist_ok=True)
    (shots / "sitecheck.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
