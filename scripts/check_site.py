"""Render pages of the built docs site in headless Chromium (Debian's `chromium` package) and save screenshots.

    mkdocs build --strict --site-dir site && python scripts/check_site.py site --out site-shots

Renders the index, one results page and one API page (the defaults; give page paths to choose others) through
a local HTTP server, as a reader's browser would, and writes one PNG per page. The links and images of every
page are checked by tests/test_docs.py (BAYESATTN_SITE=site). Exit status 2 when Chromium is not installed
(`apt-get install chromium`), 1 when a page does not render.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site without a log line per request (a failed page is reported by its screenshot's line)."""

    def log_message(self, format, *args):  # noqa: A002 -- the base class's signature
        pass


PAGES = ("index.html", "results/phase_diagram/index.html", "reference/api/index.html")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=1280,2000",
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site", help="the built site (mkdocs build --site-dir DIR)")
    ap.add_argument("pages", nargs="*", default=list(PAGES), help="pages to render, relative to the site")
    ap.add_argument("--out", default="site-shots", help="folder for the screenshots")
    args = ap.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("check_site: chromium not found (apt-get install chromium)", file=sys.stderr)
        return 2
    site, out = Path(args.site).resolve(), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    bad = 0
    try:
        for page in args.pages:
            if not (site / page).is_file():
                print(f"check_site: {page}: not in the site", file=sys.stderr)
                bad += 1
                continue
            shot = out / (page.replace("/", "_").removesuffix(".html") + ".png")
            url = f"http://127.0.0.1:{server.server_port}/{page}"
            with tempfile.TemporaryDirectory() as profile:
                r = subprocess.run(
                    [chromium, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}", url],
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
            ok = r.returncode == 0 and shot.is_file() and shot.stat().st_size > 10_000
            print(f"{'ok ' if ok else 'BAD'} {page} -> {shot}")
            bad += not ok
    finally:
        server.shutdown()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
