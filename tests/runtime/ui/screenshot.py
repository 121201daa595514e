"""The screenshots in docs/figures/ of the three ``/ui`` pages (not a test: run it by hand).

The extender's is taken on a SQLite-backed extender with pods bound through its verbs,
the share daemon's with lock clients speaking the protocol by hand (no GPU).

The round service is the real one (store, driver, decider, HTTP app) with the in-process
executor (virtual jobs that step and speak the lease protocol without Ray), so the page
shows a busy cluster in a minute on a laptop.

    PYTHONPATH=src python tests/runtime/ui/screenshot.py [--out docs/figures]
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
                    "document.querySelectorAll('#mosaic .gpu').length === 16", 120, "mosaic"
                )
                browser.pump(2.5)
                browser.screenshot(out / "live_ui.png")
                assert browser.console == [], browser.console
            finally:
                browser.close()
        finally:
            service.stop()


def extender_page(out: Path) -> None:
    import threading

    import uvicorn

    sys.path.insert(0, str(ROOT / "tests" / "apps" / "extender"))
    from extender_builders import args, binding, cluster, service, v1_pod

    from gpumosaic.apps.extender.app import create_app
    from gpumosaic.apps.extender.wire import ExtenderArgs, ExtenderBindingArgs

    with tempfile.TemporaryDirectory() as tmp:
        svc = service(cluster(("V100", 8), ("V100", 8), ("A100", 4), ("T4", 4)), Path(tmp) / "s.db")
        config = uvicorn.Config(create_app(svc), host="127.0.0.1", port=0, log_level="warning")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.02)
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        browser = Browser(width=1440, height=900)
        try:
            browser.open(f"{url}/ui")
            browser.wait_for("document.querySelectorAll('#mosaic .gpu').length === 24", 120, "gpus")
            nodes = ["n0", "n1", "n2", "n3"]
            for i, milli in enumerate([1000, 500, 500, 250, 1000, 300, 700, 1000, 500, 250, 250]):
                pod = v1_pod(milli=milli, name=f"train-{i}")
                svc.filter(ExtenderArgs.model_validate(args(pod, nodes)))
                node = nodes[i % 4]
                svc.bind(ExtenderBindingArgs.model_validate(binding(pod, node)))
                if i % 3 == 0:
                    browser.pump(0.4)
            svc.release_by_name("team-a", "train-3")
            browser.pump(2.5)
            browser.screenshot(out / "live_ui_extender.png")
            assert browser.console == [], browser.console
        finally:
            browser.close()
            server.should_exit = True
            thread.join(10)


def share_page(out: Path) -> None:
    from test_share_page import Client, Running

    from gpumosaic.runtime.share.daemon import socket_path

    with tempfile.TemporaryDirectory() as tmp:
        running = Running(Path(tmp) / "sock", tq_s=1.0)
        browser = Browser(width=1440, height=900)
        clients = []
        try:
            browser.open(f"{running.url}/ui")
            browser.wait_for("document.querySelectorAll('[data-gpu]').length === 2", 120, "locks")
            path = socket_path(running.daemon.socket_dir, 0)
            a, b, c = (Client(path, n) for n in ("resnet50-train", "bert-finetune", "eval-job"))
            clients += [a, b, c]
            a.send("REQ_LOCK")
            assert a.read() == "LOCK_OK"
            b.send("REQ_LOCK")
            c.send("REQ_LOCK")
            assert a.read() == "DROP_LOCK"
            browser.pump(1.0)
            a.send("LOCK_RELEASED")
            assert b.read() == "LOCK_OK"
            a.send("REQ_LOCK")
            browser.pump(2.0)
            other = Client(socket_path(running.daemon.socket_dir, 1), "llm-serve")
            clients.append(other)
            other.send("REQ_LOCK")
            assert other.read() == "LOCK_OK"
            browser.pump(1.5)
            browser.screenshot(out / "live_ui_share.png")
            assert browser.console == [], browser.console
        finally:
            for client in clients:
                client.close()
            browser.close()
            running.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "figures")
    parser.add_argument("--pages", default="serve,extender,share")
    args = parser.parse_args()
    pages = {"serve": serve_page, "extender": extender_page, "share": share_page}
    for name in args.pages.split(","):
        pages[name](args.out)
    print(sorted(p.name for p in args.out.glob("live_ui*.png")))


if __name__ == "__main__":
    main()
