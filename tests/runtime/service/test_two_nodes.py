"""``serve`` on a Ray cluster of two nodes on this machine (``ray start --head`` and a
second ``ray start --address``, one logical V100 each): leases land on the node their
plan names, a 2-GPU gang spans both nodes, and when the second node goes away (its
processes killed) its GPUs leave the decider's cluster, its jobs go back to the queue and
resume from their checkpoints on the node left, none runs twice and none is lost; when a
node comes back it is scheduled again.

The cluster is not the test session's Ray (tests/conftest.py): the service runs against
it in a subprocess (``gpumosaic serve --ray-address``). Each Ray node is started in a
session of its own and stopped by killing that session's processes (never ``ray stop``,
which would stop every Ray on the machine). The head checks its nodes' health every
0.5 s so that a killed node is called dead in about two seconds. Both nodes are given
``--node-ip-address=127.0.0.1`` and joined through 127.0.0.1; Ray's command line
advertises the machine's own address instead of a loopback one (a cluster of several
nodes cannot use Ray's single-machine switch that keeps a local instance on 127.0.0.1,
``ray_connect.init_local_ray``), so both nodes share one address, which is what pinning
leases by node id is for; the traffic stays on this machine.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from rounds_support import JOBS, wait_for

from gpumosaic.runtime.executors.ray_connect import LOOPBACK_ENV

pytestmark = pytest.mark.slow

RAY = Path(sys.executable).with_name("ray")
SRC = str(Path(__file__).parents[3] / "src")
START_S = 90.0  # bounds, not expectations: a node starts in ~3 s on an idle machine
STEP_S = 0.05
# Every rank prints the raylet it runs under (jobs/raylet.py: its nearest raylet
# ancestor): the node a lease really landed on, whatever the plan said.
COMMAND = f"{sys.executable} {JOBS / 'raylet.py'} && exec {sys.executable} {JOBS / 'train.py'}"
HEALTH = {  # the head's GCS: a missing node is dead after 3 checks 0.5 s apart
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500",
    "RAY_health_check_failure_threshold": "3",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def session_pids(sid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid:
            out.append(int(entry.name))
    return out


def kill_session(sid: int) -> None:
    """Every process of a Ray node's session, at once (as a machine that goes away)."""
    for pid in session_pids(sid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@dataclass
class RayNodeProcs:
    sid: int
    raylet_pid: int
    node_id: str


def start_node(args: list[str], env: dict[str, str], log: Path) -> RayNodeProcs:
    """``ray start`` (not blocking) in a session of its own; its daemons stay in it."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [str(RAY), "start", *args, "--disable-usage-stats"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        code = proc.wait(timeout=START_S)
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        tail = log.read_text()[-2000:]
        raise AssertionError(f"ray start took over {START_S:g} s: {tail}") from None
    assert code == 0, log.read_text()[-2000:]
    for pid in session_pids(proc.pid):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "raylet":
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                node_id = next(
                    a.split(b"=", 1)[1].decode() for a in cmdline if a.startswith(b"--node_id=")
                )
                return RayNodeProcs(proc.pid, pid, node_id)
    kill_session(proc.pid)
    raise AssertionError(f"no raylet in the session of ray start: {log.read_text()[-2000:]}")


@dataclass
class TwoNodes:
    address: str
    head: RayNodeProcs
    worker: RayNodeProcs
    env: dict[str, str]
    temp: Path
    sessions: list[int]

    def node_args(self, name: str) -> list[str]:
        return [
            f"--address={self.address}",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=1",
            "--num-gpus=1",
            '--resources={"gpumosaic_model_V100": 1}',
            "--object-store-memory=100000000",
            f"--temp-dir={self.temp / name}",
        ]

    def start_worker(self, name: str) -> RayNodeProcs:
        node = start_node(self.node_args(name), self.env, self.temp / f"{name}.log")
        self.sessions.append(node.sid)
        return node


@pytest.fixture
def two_nodes() -> Iterator[TwoNodes]:
    if not RAY.exists():
        pytest.skip(f"no Ray command line next to this Python ({RAY})")
    temp = Path(tempfile.mkdtemp(prefix="gm2n-", dir="/tmp"))  # short: socket paths
    # Not the loopback switch of the session's local Ray (ray_connect.init_local_ray): a
    # node's ``ray start --address`` refuses to join a cluster under it.
    env = {k: v for k, v in os.environ.items() if k != LOOPBACK_ENV}
    env = {**env, "RAY_AUTH_MODE": "disabled", **HEALTH}
    port = free_port()
    sessions: list[int] = []
    try:
        head = start_node(
            [
                "--head",
                f"--port={port}",
                "--node-ip-address=127.0.0.1",
                "--num-cpus=1",
                "--num-gpus=1",
                '--resources={"gpumosaic_model_V100": 1}',
                "--object-store-memory=100000000",
                "--include-dashboard=false",
                f"--dashboard-port={free_port()}",
                f"--ray-client-server-port={free_port()}",
                f"--temp-dir={temp / 'head'}",
            ],
            env,
            temp / "head.log",
        )
        sessions.append(head.sid)
        cluster = TwoNodes(f"127.0.0.1:{port}", head, head, env, temp, sessions)
        cluster.worker = cluster.start_worker("worker")
        yield cluster
    finally:
        for sid in reversed(sessions):
            kill_session(sid)
        shutil.rmtree(temp, ignore_errors=True)


class Serve:
    """``gpumosaic serve --ray-address`` in a subprocess, spoken to over HTTP."""

    def __init__(self, address: str, tmp: Path) -> None:
        self.tmp = tmp
        self.out = tmp / "serve.out"
        cmd = [
            sys.executable, "-m", "gpumosaic.cli", "serve", "--ray-address", address,
            "--port", "0", "--state", str(tmp / "state" / "state.db"), "--round-s", "2",
            "--grace-s", "1", "--start-timeout-s", "30", "--ray-timeout-s", "30",
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": SRC, "RAY_AUTH_MODE": "disabled"}
        with open(self.out, "wb") as out:
            self.proc = subprocess.Popen(
                cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            wait_for(self._started, START_S, "serve to print its URL", self.output)
        except BaseException:
            kill_session(self.proc.pid)
            raise
        self.url = next(line for line in self.output().splitlines() if line.startswith("http://"))

    def output(self) -> str:
        return self.out.read_text(errors="replace")

    def _started(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"serve ended: {self.output()}")
        return any(line.startswith("http://") for line in self.output().splitlines())

    def call(self, path: str, body: dict[str, object] | None = None) -> object:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            raw = response.read().decode()
        return json.loads(raw) if path != "/metrics" else raw

    def submit(self, steps: int, gpus: int = 1) -> int:
        body = {"command": COMMAND, "steps": steps, "gpus": gpus, "env": {"STEP_S": str(STEP_S)}}
        job = self.call("/v1/jobs", body)
        assert isinstance(job, dict)
        return int(job["id"])

    def job(self, job_id: int) -> dict[str, object]:
        job = self.call(f"/v1/jobs/{job_id}")
        assert isinstance(job, dict)
        return job

    def metric(self, name: str) -> float:
        text = str(self.call("/metrics"))
        found = re.search(rf"^gpumosaic_{name} (\S+)$", text, re.M)
        return float(found.group(1)) if found else float("nan")

    def log(self, job_id: int) -> str:
        path = self.tmp / "state" / "logs" / f"job-{job_id}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                kill_session(self.proc.pid)
                self.proc.wait(timeout=10)


def lease_blocks(log: str) -> list[tuple[str, int, int | None, float | None]]:
    """(lease id, rank, raylet pid, steps it started from) per process of a job's log."""
    # A gang's ranks write one log, interleaved: each rank's raylet line names its lease
    # and rank (jobs/raylet.py), so it is read from the whole log, not from its block.
    raylets = {
        (m.group(2), int(m.group(3))): int(m.group(1))
        for m in re.finditer(r"^raylet=(\d+) lease=(\S+) rank=(\d+)$", log, re.M)
    }
    out = []
    parts = re.split(r"--- lease (\S+) rank (\d+) ---\n", log)
    for lease, rank, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        start = re.search(r"^start .* from=(\d+)", body, re.M)  # (one-rank jobs' checks)
        out.append(
            (
                lease,
                int(rank),
                raylets.get((lease, int(rank))),
                float(start.group(1)) if start else None,
            )
        )
    return out


def ranks_logged(serve, job_id: int, ranks: int) -> bool:  # type: ignore[no-untyped-def]
    """Every rank's lines reached the job's log: a remote rank's output may arrive a moment
    after the job is done (its last report came first)."""
    blocks = last_lease(serve.log(job_id))
    return len(blocks) >= ranks and all(b[2] is not None for b in blocks)


def last_lease(log: str) -> list[tuple[str, int, int | None, float | None]]:
    """The blocks of the job's last lease (the one that ran it to the end; an earlier
    one may have been cut before its ranks printed anything)."""
    blocks = lease_blocks(log)
    return [b for b in blocks if blocks and b[0] == blocks[-1][0]]


def test_serve_on_two_ray_nodes_places_gangs_and_survives_a_lost_node(
    two_nodes: TwoNodes, tmp_path: Path
) -> None:
    head, worker = two_nodes.head, two_nodes.worker
    # The scheduler's nodes are the Ray nodes in node-id order (cluster.discover).
    node_of_index = sorted([head.node_id, worker.node_id])
    raylet_of_node = {head.node_id: head.raylet_pid, worker.node_id: worker.raylet_pid}
    serve = Serve(two_nodes.address, tmp_path)
    try:
        assert serve.metric("cluster_gpus") == 2, serve.output()
        # A gang across the two one-GPU nodes: one rank on each.
        gang = serve.submit(steps=20, gpus=2)
        wait_for(lambda: serve.job(gang)["state"] == "done", 60, "the gang", serve.output)
        wait_for(
            lambda: ranks_logged(serve, gang, 2), 120, "the gang's ranks' logs",
            lambda: serve.log(gang),
        )  # fmt: skip
        ranks = last_lease(serve.log(gang))
        assert {r[2] for r in ranks} == {head.raylet_pid, worker.raylet_pid}, ranks
        # Three one-GPU jobs time-share the two GPUs (so they checkpoint and move).
        singles = [serve.submit(steps=120) for _ in range(3)]

        def on_worker_with_checkpoint() -> int | None:
            for job_id in singles:
                job = serve.job(job_id)
                blocks = lease_blocks(serve.log(job_id))
                if (
                    job["state"] == "running"
                    and float(job["checkpoint_steps"]) > 0  # type: ignore[arg-type]
                    and blocks
                    and blocks[-1][2] == worker.raylet_pid
                    and float(job["steps_done"]) > float(job["checkpoint_steps"])  # type: ignore[arg-type]
                ):
                    return job_id
            return None

        wait_for(
            lambda: on_worker_with_checkpoint() is not None,
            60,
            "a job running on the second node past a checkpoint",
            serve.output,
        )
        victim = on_worker_with_checkpoint()
        assert victim is not None
        before = {j: float(serve.job(j)["checkpoint_steps"]) for j in singles}  # type: ignore[arg-type]
        killed_at = time.time()
        kill_session(worker.sid)  # the second node goes away
        seen = {j: len(serve.log(j)) for j in singles}  # what its processes wrote
        wait_for(
            lambda: serve.metric("ray_nodes_lost_total") == 1 and serve.metric("cluster_gpus") == 1,
            120,
            "the service to see the node gone",
            serve.output,
        )
        wait_for(
            lambda: all(serve.job(j)["state"] == "done" for j in singles),
            90,
            "every job to finish on the node left",
            lambda: serve.output() + "".join(serve.log(j) for j in singles),
        )
        for job_id in [gang, *singles]:
            job = serve.job(job_id)
            assert job["steps_done"] == job["steps"], job
            assert "TWICE" not in serve.log(job_id)
        for job_id in singles:
            blocks = lease_blocks(serve.log(job_id))
            starts = [b[3] for b in blocks if b[3] is not None]
            assert starts == sorted(starts), (job_id, starts)  # never backwards
            after = lease_blocks(serve.log(job_id)[seen[job_id] :])
            # After the loss every process ran on the head, from the checkpoint or later.
            assert all(b[2] in (None, head.raylet_pid) for b in after), after
            resumed = [b[3] for b in after if b[3] is not None]
            assert all(s >= before[job_id] for s in resumed), (job_id, before, resumed)
        assert any(
            b[3] is not None and b[3] >= before[victim] > 0
            for b in lease_blocks(serve.log(victim)[seen[victim] :])
        ), serve.log(victim)
        # The node comes back (a new Ray node id on the same machine): scheduled again.
        back = two_nodes.start_worker("back")
        wait_for(
            lambda: (
                serve.metric("ray_nodes_returned_total") == 1 and serve.metric("cluster_gpus") == 2
            ),
            120,
            "the service to take the node back",
            serve.output,
        )
        again = serve.submit(steps=20, gpus=2)
        wait_for(lambda: serve.job(again)["state"] == "done", 60, "a gang again", serve.output)
        wait_for(
            lambda: ranks_logged(serve, again, 2), 120, "its ranks' logs", lambda: serve.log(again)
        )
        ranks = last_lease(serve.log(again))
        assert {r[2] for r in ranks} == {head.raylet_pid, back.raylet_pid}, ranks
    finally:
        serve.stop()
    # The record: each lease ran where its plan said; the loss and return are events.
    from gpumosaic.runtime.state.store import Store

    store = Store(tmp_path / "state" / "state.db")
    try:
        kinds = [e.kind for e in store.events()]
        assert kinds.count("node_lost") == 1 and kinds.count("node_returned") == 1, kinds
        planned = {lease.id: lease.parts for lease in store.leases()}
        for job_id in [gang, *singles]:
            for lease_id, rank, raylet, _ in lease_blocks(serve.log(job_id)):
                parts = planned[lease_id]
                nodes = [node for node, gpus, _ in parts for _ in gpus]
                node_id = node_of_index[nodes[rank]]
                if raylet is not None and node_id in raylet_of_node:
                    assert raylet == raylet_of_node[node_id], (job_id, lease_id, parts)
        # A lease was running on the second node when it went away, and it ended.
        second = node_of_index.index(worker.node_id)
        cut = [
            x
            for x in store.leases()
            if x.job_id in singles
            and any(node == second for node, _, _ in x.parts)
            and x.ended_at is not None
            and x.ended_at >= killed_at
        ]
        assert cut, [(x.id, x.parts, x.started_at, x.ended_at) for x in store.leases()]
        assert not [x for x in store.leases() if x.active], "a lease outlived the service"
        per_job = {j: [x for x in store.leases() if x.job_id == j] for j in singles}
        for job_id, leases in per_job.items():  # one process at a time per job
            spans = sorted((x.started_at, x.ended_at or float("inf")) for x in leases)
            for (_, end), (start, _) in itertools.pairwise(spans):
                assert start >= end, (job_id, spans)
    finally:
        store.close()
