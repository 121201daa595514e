"""Benchmark: filter + prioritize latency of the extender under concurrent clients, at
openb scale (1,213 nodes). Not a test. Issue 23's target: 16 clients, p99 <= 50 ms.

    .venv/bin/python bench/bench_extender_clients.py [--clients 16] [--seconds 30]
        [--src DIR] [--json]

Starts ``gpumosaic extender --cluster openb:gpu --target-workload openb:default`` in a
subprocess (from ``--src``, default this tree's src/: point it at another checkout to
compare versions on the same machine and load), then runs ``--clients`` concurrent
clients in one asyncio process, each on its own keep-alive connection. A client cycle is
kube-scheduler's: filter with every node's name (nodeCacheCapable), prioritize with the
names that passed, bind to the best, then DELETE the pod (standalone release), so the
cluster stays as loaded as at start and every filter scores ~1,213 nodes. Pods are the
openb:default tasks in fill order. The latency is filter + prioritize, from sending the
filter to receiving the prioritize answer. The client is a minimal HTTP/1.1 writer, as
kube-scheduler's Go client is: its own cost is small next to the server's.

Reports p50/p90/p99/max, cycles per second, errors, the server's CPU time per cycle and
the machine's load average (wall-clock latencies on a shared machine measure the queue
for a CPU as well).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import orjson

from gpumosaic.apps.extender.vocabulary import pod_object
from gpumosaic.mechanisms.fill.simulator import fill_order
from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks

ROOT = Path(__file__).resolve().parents[1]


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Connection:
    """One keep-alive HTTP/1.1 connection with Content-Length bodies."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def call(self, method: bytes, path: bytes, body: bytes = b"") -> tuple[int, bytes]:
        self.writer.write(
            b"%s %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (method, path, len(body), body)
        )
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


async def client(
    port: int, k: int, pods: list[dict], names: list[str], stop_at: float, out: dict
) -> None:
    conn = await Connection.open(port)
    i = k
    try:
        while time.monotonic() < stop_at:
            pod = pods[i % len(pods)]
            name = f"c{k}-{i}"
            pod = {**pod, "metadata": {**pod["metadata"], "name": name, "uid": f"u-{name}"}}
            start = time.perf_counter()
            status, body = await conn.call(
                b"POST", b"/filter", orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
            )
            if status != 200:
                out["errors"] += 1
                i += out["clients"]
                continue
            passed = orjson.loads(body)["NodeNames"] or []
            if not passed:
                out["unplaceable"] += 1
                i += out["clients"]
                continue
            status, body = await conn.call(
                b"POST",
                b"/prioritize",
                orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": passed}),
            )
            out["latency"].append(time.perf_counter() - start)
            if status != 200:
                out["errors"] += 1
                i += out["clients"]
                continue
            host = max(orjson.loads(body), key=lambda s: s["Score"])["Host"]
            binding = {
                "PodName": name,
                "PodNamespace": "bench",
                "PodUID": f"u-{name}",
                "Node": host,
            }
            status, body = await conn.call(b"POST", b"/bind", orjson.dumps(binding))
            if status != 200:
                out["errors"] += 1
            elif orjson.loads(body)["Error"]:
                out["rejected"] += 1  # another client took the room first: a correct answer
            else:
                status, _ = await conn.call(b"DELETE", f"/pods/bench/{name}".encode())
                out["errors"] += status != 200
            out["cycles"] += 1
            i += out["clients"]
    finally:
        conn.close()


async def load(port: int, clients: int, seconds: float, pods: list[dict], names: list[str]) -> dict:
    out: dict = {"latency": [], "errors": 0, "rejected": 0, "unplaceable": 0, "cycles": 0}
    out["clients"] = clients
    stop_at = time.monotonic() + seconds
    await asyncio.gather(*(client(port, k, pods, names, stop_at, out) for k in range(clients)))
    return out


def wait_healthy(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("the extender exited at start")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: b\r\n\r\n")
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("the extender did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    cluster = load_openb_nodes("openb:gpu")
    tasks = load_openb_tasks("openb:default")
    order = fill_order(tasks, cluster.num_gpus * 1000, 1.3, np.random.default_rng(args.seed))
    pods = [
        pod_object(replace(tasks[t], id=i), f"p{i}", "bench", f"u{i}")
        for i, t in enumerate(order[:2000])
    ]
    names = [n.name for n in cluster.nodes]
    port = free_port()
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            sys.executable, "-c", "from gpumosaic.cli import main; main()", "extender",
            "--cluster", "openb:gpu", "--target-workload", "openb:default",
            "--db", str(Path(scratch) / "s.db"), "--port", str(port), "--log-level", "warning",
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(args.src.resolve())}
        proc = subprocess.Popen(command, env=env)
        try:
            wait_healthy(port, proc)
            asyncio.run(load(port, args.clients, args.warmup_s, pods, names))
            before = cpu_s(proc.pid)
            began = time.perf_counter()
            out = asyncio.run(load(port, args.clients, args.seconds, pods, names))
            elapsed = time.perf_counter() - began
            server_cpu = cpu_s(proc.pid) - before
        finally:
            proc.terminate()
            proc.wait(30)
    ms = np.asarray(out["latency"]) * 1000.0
    report = {
        "src": str(args.src),
        "nodes": len(names),
        "clients": args.clients,
        "seconds": round(elapsed, 1),
        "samples": len(ms),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p90_ms": round(float(np.percentile(ms, 90)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "max_ms": round(float(ms.max()), 2),
        "cycles_per_s": round(out["cycles"] / elapsed, 1),
        "errors": out["errors"],
        "bind_rejected": out["rejected"],
        "server_cpu_ms_per_cycle": round(1000 * server_cpu / max(out["cycles"], 1), 2),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
