"""The screenshots in docs/figures/ of the three ``/ui`` pages (not a test: run it by hand).

The round service is the real one (store, driver, decider, HTTP app) with the in-process
executor (virtual jobs that step and speak the lease protocol without Ray), so the page
shows a busy cluster in a minute on a laptop.

    PYTHONPATH=src python tests/live/ui/screenshot.py [--out docs/figures]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(Path(__file__).parent), str(ROOT / "bench")]

from browser import Browser  # noqa: E402

from ui_demo_service import demo_service, submit_jobs  # noqa: E402


def serve_page(out: Path, rounds: int = 6) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        nodes = [("V100", 4), ("V100", 4), ("P100", 4), ("K80", 4)]
        service = demo_service(Path(tmp), nodes, round_s=4.0)
        service.start()
        try:
            submit_jobs(service, 34, steps=(300, 4000))
            driver = service.driver
            assert driver is not None
            while driver.round_idx < rounds:
                time.sleep(0.2)
            submit_jobs(service, 4, seed=1)  # a few arrive mid-round: "admitted at the next"
            browser = Browser(width=1440, height=1000)
            try:
                browser.open(f"{service.url}/ui")
                browser.wait_for(
                    "document.querySelectorAll('#mosaic .gpu').length === 16", 30, "mosaic"
                )
                browser.pump(2.5)
                browser.screenshot(out / "live_ui.png")
                assert browser.console == [], browser.console
            finally:
                browser.close()
        finally:
            service.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "figures")
    args = parser.parse_args()
    serve_page(args.out)
    print(args.out / "live_ui.png")


if __name__ == "__main__":
    main()
