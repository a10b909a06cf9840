"""Take a headless-Chromium screenshot of a page (by default dist/reference/scorecard.html).

    python scripts/screenshot.py [PAGE] [-o OUT.png] [--width 1280] [--height 2200]

Needs `chromium` (Debian: `apt-get install -y chromium`) or $CHROMIUM naming the
browser. Exit 0 with the PNG path printed; 2 when the page does not exist; 3 when
no browser is found or it fails (the reason printed, no traceback).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    """$CHROMIUM, else the first Chromium-like browser on PATH."""
    named = os.environ.get("CHROMIUM")
    if named:
        return shutil.which(named) or (named if Path(named).is_file() else None)
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def screenshot(page: Path, out: Path, *, width: int = 1280, height: int = 2200) -> Path:
    """The page rendered at WIDTHxHEIGHT into `out` (PNG). RuntimeError when it cannot."""
    browser = find_browser()
    if browser is None:
        raise RuntimeError("no Chromium found; apt-get install -y chromium (or set $CHROMIUM)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vpr-shot-") as profile:
        args = [
            browser,
            "--headless",
            "--no-sandbox",  # root in a container has no user namespace sandbox
            "--disable-gpu",
            # nothing but the page: no QUIC, no background fetches, updates or sync
            "--disable-quic",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={profile}",  # a fresh profile each time
            f"--window-size={width},{height}",
            f"--screenshot={out.resolve()}",
            page.resolve().as_uri(),
        ]
        done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not out.is_file() or out.stat().st_size == 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{browser} exited {done.returncode}: " + " | ".join(tail))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("page", nargs="?", default="dist/reference/scorecard.html")
    parser.add_argument("-o", "--out", help="PNG to write (default: PAGE with .png)")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2200)
    args = parser.parse_args(argv)
    page = Path(args.page)
    if not page.is_file():
        print(
            f"screenshot: {page}: not found; run `vpr release` (or `vpr conform`) first",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out) if args.out else page.with_suffix(".png")
    try:
        screenshot(page, out, width=args.width, height=args.height)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"screenshot: {exc}", file=sys.stderr)
        return 3
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
