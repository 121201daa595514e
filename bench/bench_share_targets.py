"""The share daemon's targets of issue 23, measured (a benchmark, not a test).

1. Hand-over with 50 clients: 50 client processes speak the protocol (no interposer, no
   GPU work: a holder answers DROP_LOCK at once), all wanting the GPU, TQ 10 ms. A
   hand-over is timed across processes on CLOCK_MONOTONIC, from the holder sending
   LOCK_RELEASED to the next client having received LOCK_OK (the daemon's turn-around plus
   both socket hops and the wake-up of the next process). Also from the daemon's event
   log: LOCK_RELEASED read -> LOCK_OK written is the same instant (one decision), and
   DROP_LOCK -> next LOCK_OK includes the holder's reaction. Target: p99 <= 2 ms.
2. A hog that ignores DROP_LOCK: it holds the lock, a waiter asks, the hog gets DROP_LOCK
   and does nothing. Timed: DROP_LOCK -> LOCK_REVOKED as the hog sees it, and the
   waiter's REQ_LOCK -> LOCK_OK. Default grace (0.5 s). Target: the hog loses the lock
   within TQ + 1 s (of its DROP_LOCK).

    PYTHONPATH=src python bench/bench_share_targets.py [--clients 50] [--seconds 8] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CLIENT = r"""
import json, os, socket, sys, time
path, until = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
s.sendall(b"REGISTER pid=%d name=bench\n" % os.getpid())
s.settimeout(0.5)  # the last holder is never dropped: it leaves when the time is up
buf, oks, rels = b"", [], []
s.sendall(b"REQ_LOCK\n")
while time.monotonic() < until + 1.0:
    try:
        chunk = s.recv(4096)
    except TimeoutError:
        continue
    now = time.monotonic_ns()
    if not chunk:
        break
    buf += chunk
    while b"\n" in buf:
        line, _, buf = buf.partition(b"\n")
        if line == b"LOCK_OK":
            oks.append(now)
        elif line == b"DROP_LOCK":
            later = time.monotonic() < until
            rels.append(time.monotonic_ns())
            s.sendall(b"LOCK_RELEASED\nREQ_LOCK\n" if later else b"LOCK_RELEASED\n")
print(json.dumps({"ok": oks, "rel": rels}))
"""


ONE_PROCESS = r"""
import json, os, selectors, socket, sys, time
path, until, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
sel = selectors.DefaultSelector()
socks = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(b"REGISTER pid=%d name=bench%d\n" % (os.getpid(), i))
    socks.append(s)
    sel.register(s, selectors.EVENT_READ, [b""])
for s in socks:
    s.sendall(b"REQ_LOCK\n")
oks, rels = [], []
while time.monotonic() < until + 1.0:
    for key, _ in sel.select(0.5):
        chunk = key.fileobj.recv(4096)
        now = time.monotonic_ns()
        if not chunk:
            sel.unregister(key.fileobj)
            continue
        key.data[0] += chunk
        while b"\n" in key.data[0]:
            line, _, key.data[0] = key.data[0].partition(b"\n")
            if line == b"LOCK_OK":
                oks.append(now)
            elif line == b"DROP_LOCK":
                later = time.monotonic() < until
                rels.append(time.monotonic_ns())
                key.fileobj.sendall(b"LOCK_RELEASED\nREQ_LOCK\n" if later else b"LOCK_RELEASED\n")
print(json.dumps({"ok": oks, "rel": rels}))
"""


RT = ["chrt", "-f", "10"]


def start_daemon(
    sock_dir: Path, tq: float, events: Path, nice: int = 0, rt: bool = False
) -> subprocess.Popen:
    cmd = ["nice", "-n", str(nice)] if nice else []
    cmd += RT if rt else []
    cmd += [sys.executable, "-c", "from gpumosaic.cli import main; main()", "share", "daemon"]
    cmd += ["--socket-dir", str(sock_dir), "--tq", str(tq), "--anti-thrashing", "on"]
    cmd += ["--event-log", str(events)]
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    for _ in range(300):
        if (sock_dir / "gpu0.sock").exists():
            return proc
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("the daemon did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(10)


def quantiles(values_s: list[float]) -> dict[str, float]:
    a = np.asarray(values_s) * 1e3
    return {
        "n": len(a),
        "p50_ms": float(np.quantile(a, 0.5)),
        "p99_ms": float(np.quantile(a, 0.99)),
        "max_ms": float(a.max()),
    }


def handover(
    clients: int, seconds: float, tmp: Path, one_process: bool, nice: int, rt: bool
) -> dict[str, object]:
    tmp.mkdir(exist_ok=True)
    events = tmp / "handover.jsonl"
    daemon = start_daemon(tmp / "h", 0.01, events, nice, rt)
    try:
        path = str(tmp / "h" / "gpu0.sock")
        until = time.monotonic() + 2.0 + seconds  # every client is in before the clock runs
        if one_process:
            cmds = [[sys.executable, "-c", ONE_PROCESS, path, str(until), str(clients)]]
        else:
            cmds = [[sys.executable, "-c", CLIENT, path, str(until)]] * clients
        prefix = RT if rt else []
        procs = [subprocess.Popen([*prefix, *cmd], stdout=subprocess.PIPE) for cmd in cmds]
        outs = [json.loads(p.communicate(timeout=seconds + 60)[0]) for p in procs]
    finally:
        stop(daemon)
    marks = sorted(
        [(t, "ok") for o in outs for t in o["ok"]] + [(t, "rel") for o in outs for t in o["rel"]]
    )
    start_ns = (until - seconds) * 1e9
    gaps, last_rel = [], None
    for t, kind in marks:
        if kind == "rel":
            last_rel = t
        elif last_rel is not None and t >= start_ns:
            gaps.append((t - last_rel) / 1e9)
            last_rel = None
    log = [json.loads(line) for line in events.read_text().splitlines()]
    drop_to_ok, drop = [], None
    for e in log:
        if e["event"] == "DROP_LOCK":
            drop = e["t_ns"]
        elif e["event"] == "LOCK_OK" and drop is not None:
            drop_to_ok.append((e["t_ns"] - drop) / 1e9)
            drop = None
    return {
        "clients": clients,
        "client_processes": len(cmds),
        "released_to_next_ok": quantiles(gaps),
        "daemon_drop_to_next_ok": quantiles(drop_to_ok),
    }


class Raw:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rb")

    def send(self, line: bytes) -> None:
        self.sock.sendall(line + b"\n")

    def expect(self, line: bytes) -> int:
        got = self.file.readline().rstrip(b"\n")
        if got != line:
            raise SystemExit(f"expected {line!r}, got {got!r}")
        return time.monotonic_ns()


def hog(tq: float, repeats: int, tmp: Path) -> dict[str, object]:
    daemon = start_daemon(tmp / "g", tq, tmp / "hog.jsonl")
    revoked, waited = [], []
    try:
        path = str(tmp / "g" / "gpu0.sock")
        for _ in range(repeats):
            h, w = Raw(path), Raw(path)
            for c in (h, w):
                c.send(b"REGISTER pid=1 name=x")
                if not c.file.readline().startswith(b"SCHED_ON"):
                    raise SystemExit("the daemon did not serialize")
            h.send(b"REQ_LOCK")
            h.expect(b"LOCK_OK")
            asked = time.monotonic_ns()
            w.send(b"REQ_LOCK")
            dropped = h.expect(b"DROP_LOCK")  # ignored
            lost = h.expect(b"LOCK_REVOKED")
            granted = w.expect(b"LOCK_OK")
            revoked.append((lost - dropped) / 1e9)
            waited.append((granted - asked) / 1e9)
            h.sock.close()
            w.sock.close()
    finally:
        stop(daemon)
    return {
        "tq_s": tq,
        "drop_to_revoked_s": {"max": max(revoked), "min": min(revoked)},
        "waiter_request_to_ok_s": {"max": max(waited)},
        "target_tq_plus_1_s": tq + 1.0,
        "met": max(revoked) <= tq + 1.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--hog-tq", default="1,5")
    parser.add_argument(
        "--daemon-nice", type=int, default=0, help="run the daemon under nice -n N (root: < 0)"
    )
    parser.add_argument(
        "--rt",
        action="store_true",
        help="daemon and clients under SCHED_FIFO (chrt -f 10; root): other tenants' CPU "
        "load out of the picture, to see the protocol's own latency",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        result = {
            "machine": f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}",
            "daemon_nice": args.daemon_nice,
            "rt": args.rt,
            "handover": handover(args.clients, args.seconds, tmp, False, args.daemon_nice, args.rt),
            "handover_one_process": handover(
                args.clients, args.seconds, tmp / "1", True, args.daemon_nice, args.rt
            ),
            "hog": [hog(float(t), 3, tmp / f"t{t}") for t in args.hog_tq.split(",")],
            "load_after": round(os.getloadavg()[0], 2),
        }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(result["machine"], f"daemon nice {args.daemon_nice}", "SCHED_FIFO" * args.rt)
    for h in (result["handover"], result["handover_one_process"]):
        for key in ("released_to_next_ok", "daemon_drop_to_next_ok"):
            q = h[key]
            print(
                f"{h['clients']} clients in {h['client_processes']} process(es), {key}: "
                f"n {q['n']}, p50 {q['p50_ms']:.3f} ms, p99 {q['p99_ms']:.3f} ms, "
                f"max {q['max_ms']:.3f} ms"
            )
    for g in result["hog"]:
        print(
            f"hog at TQ {g['tq_s']:g} s: DROP_LOCK -> LOCK_REVOKED "
            f"{g['drop_to_revoked_s']['min']:.3f}-{g['drop_to_revoked_s']['max']:.3f} s "
            f"(target <= {g['target_tq_plus_1_s']:g} s), waiter REQ_LOCK -> LOCK_OK max "
            f"{g['waiter_request_to_ok_s']['max']:.3f} s"
        )
    print(f"load average after: {result['load_after']}")


if __name__ == "__main__":
    main()
