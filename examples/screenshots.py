"""Screenshots of the collector's pages from the demo data, for the docs (``python -m
examples.screenshots``; docs/collector.md and the README show them): the demo agent's run
and its edited run are recorded, pushed to a collector started here (SQLite in a temporary
folder), and the run list, the edited run's page and their diff are drawn as a user first
sees them, at 1280 and at 390 px wide.

Needs Chromium (Debian: ``apt-get install chromium``) and Playwright (the dev extra).
Writes ``{runs,run,diff}-{1280,390}.png`` into ``--out`` (default ``docs/img``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from examples.agent import ScriptedModel, run
from examples.demo import EDITED, TASK, _free_port
from tracetape import Tape
from tracetape.stores.client import push

ROOT = Path(__file__).resolve().parents[1]
SIZES = ((1280, 900), (390, 844))


def _record(folder: Path) -> tuple[Path, Path]:
    """The demo agent's run and its edited run, recorded as ``make demo`` records them."""
    paths = folder / "412.jsonl", folder / "412-edited.jsonl"
    for path, task in zip(paths, (TASK, EDITED), strict=True):
        with Tape(path, mode="record") as tape:
            run(task, tape, ScriptedModel(latency_s=0.02))
    return paths


def _serve(db: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port(8790)
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "tracetape", "serve", "--db", f"sqlite:///{db}",
               "--port", str(port)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "TRACETAPE_TOKEN"}
    server = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    for _ in range(200):
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                return server, url
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise SystemExit("screenshots: the collector did not start")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.screenshots", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("screenshots: Chromium is not installed (Debian: apt-get install chromium)")
        return 2
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        first, edited = _record(folder)
        server, url = _serve(folder / "collector.db")
        try:
            runs = [path.stem for path in (first, edited)]
            for path in (first, edited):
                push(path, url, run_id=path.stem)
            pages = {
                "runs": f"{url}/",
                "run": f"{url}/runs/{runs[1]}",
                "diff": f"{url}/diff?a={runs[0]}&b={runs[1]}",
            }
            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"]
                )
                for width, height in SIZES:
                    page = browser.new_page(viewport={"width": width, "height": height})
                    for name, address in pages.items():
                        page.goto(address)
                        page.screenshot(path=str(args.out / f"{name}-{width}.png"))
                    page.close()
                browser.close()
        finally:
            server.terminate()
            server.wait(10)
    print(
        f"screenshots of {', '.join(pages)} at {', '.join(str(w) for w, _ in SIZES)} px: {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
