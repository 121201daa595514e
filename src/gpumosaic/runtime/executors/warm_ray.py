"""The warm Ray executor: one long-lived launcher actor per Ray node starts the processes
of every lease placed on that node, so a new lease costs a process start (~0.1-0.3 s on
a loaded 2-core machine) instead of a Ray actor start plus a process start (~0.5-2 s).

The launcher holds no resources (``num_cpus=0``; pinned to its node by node id);
the placement layer's choice of node and GPU (``CUDA_VISIBLE_DEVICES``) is what a lease
gets, as with the per-lease executor, but Ray's own GPU accounting is not consulted.
Processes are started by one spawner thread that lives as long as the launcher, so
``PR_SET_PDEATHSIG`` (bound to the forking thread) kills them exactly when the launcher
dies: a lost node or a dead service leaves no job running. Exits are collected by a
waiter thread per process and handed to the service by one long call per launcher
(``exits``), which the executor's ``poll`` checks without blocking.

A launcher that dies (its node went away) loses every lease on it: each is reported as
lost (back to the queue at its checkpoint), and the next launch on that node starts a
new launcher.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from dataclasses import dataclass, field
from typing import Any

from gpumosaic.runtime.executors.contract import ExitReport, LaunchSpec, rank_env
from gpumosaic.runtime.executors.ray import (
    CANNOT_START_CODE,
    NAMESPACE,
    LeaseProcess,
    log_tail,
)

EXITS_WAIT_S = 2.0  # a launcher's ``exits`` call returns at the latest after this


class NodeLauncher:
    """Body of the per-node Ray actor (decorated in ``WarmRayExecutor``)."""

    def __init__(self) -> None:
        self._procs: dict[str, LeaseProcess] = {}
        self._done: list[tuple[str, int | None, str, str]] = []  # key, code, tail, detail
        self._cond = threading.Condition()
        self._early: dict[str, float] = {}  # stopped before its process started: grace
        self._spawn: queue.Queue[tuple[str, str, str, dict[str, str], str, queue.Queue[Any]]]
        self._spawn = queue.Queue()
        threading.Thread(target=self._spawner, name="spawner", daemon=True).start()

    def ready(self) -> bool:
        return True

    def _spawner(self) -> None:
        while True:
            key, command, workdir, env, log_path, reply = self._spawn.get()
            try:
                proc = LeaseProcess(command, workdir, env, log_path)
            except OSError as err:  # the log itself cannot be written
                self._finish(key, CANNOT_START_CODE, "", f"cannot start: {err.strerror}")
                reply.put(None)
                continue
            if proc.failure():  # cannot start: a failed attempt, reason in its log
                self._finish(key, CANNOT_START_CODE, log_tail(log_path), proc.failure())
                reply.put(None)
                continue
            with self._cond:
                self._procs[key] = proc
                early = self._early.pop(key, None)
            if early is not None:  # its stop arrived while it was being started
                proc.terminate(early)
            threading.Thread(target=self._waiter, args=(key, proc), daemon=True).start()
            reply.put(proc.pid())

    def _waiter(self, key: str, proc: LeaseProcess) -> None:
        code, tail = proc.wait()
        self._finish(key, code, tail, "")

    def _finish(self, key: str, code: int | None, tail: str, detail: str) -> None:
        with self._cond:
            self._procs.pop(key, None)
            self._done.append((key, code, tail, detail))
            self._cond.notify_all()

    def start(
        self, key: str, command: str, workdir: str, env: dict[str, str], log_path: str
    ) -> int | None:
        reply: queue.Queue[Any] = queue.Queue()
        self._spawn.put((key, command, workdir, env, log_path, reply))
        pid: int | None = reply.get()
        return pid

    def terminate(self, key: str, grace_s: float) -> None:
        with self._cond:
            proc = self._procs.get(key)
            if proc is None and not any(k == key for k, *_ in self._done):
                self._early[key] = grace_s  # not started yet: stopped once it is
        if proc is not None:
            proc.terminate(grace_s)

    def kill(self, key: str) -> None:
        self.terminate(key, 0.0)

    def exits(self, timeout_s: float) -> list[tuple[str, int | None, str, str]]:
        """Exits since the last call; waits up to ``timeout_s`` for the first."""
        with self._cond:
            if not self._done:
                self._cond.wait(timeout_s)
            out, self._done = self._done, []
        return out


@dataclass(slots=True)
class _Launcher:
    actor: Any
    node_id: str
    pending: Any = None  # the outstanding ``exits`` call


@dataclass(slots=True)
class _Lease:
    spec: LaunchSpec
    keys: list[str]
    nodes: list[str]  # launcher of each rank
    results: dict[int, tuple[int | None, str, bool, str]] = field(default_factory=dict)


class WarmRayExecutor:
    """Leases as processes of per-node launcher actors (see module doc)."""

    def __init__(self, wake: threading.Event | None = None) -> None:
        """``wake``: set whenever a launcher reports exits (the driver's loop waits on
        it, so a job's exit is handled at once, not at the next poll)."""
        import ray

        self.ray = ray
        remote: Any = ray.remote  # its stubs lack the actor options
        self._cls = remote(num_cpus=0, max_restarts=0, max_concurrency=16)(NodeLauncher)
        self._launchers: dict[str, _Launcher] = {}
        self._leases: dict[str, _Lease] = {}
        self._owner: dict[str, tuple[str, int]] = {}  # process key -> (lease, rank)
        self._port = 29500
        self._wake = wake

    def _ask_exits(self, launcher: _Launcher) -> None:
        launcher.pending = launcher.actor.exits.remote(EXITS_WAIT_S)
        wake = self._wake
        if wake is not None:
            launcher.pending.future().add_done_callback(lambda _: wake.set())

    def warm(self, nodes: list[tuple[str, str]]) -> None:
        """Start the launchers of ``nodes`` ((ray node id, ip)) now, not at first use."""
        launchers = [self._launcher(node_id, ip) for node_id, ip in nodes]
        self.ray.get([launcher.actor.ready.remote() for launcher in launchers])

    def _launcher(self, node_id: str, ip: str) -> _Launcher:
        launcher = self._launchers.get(node_id)
        if launcher is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            actor = self._cls.options(  # by node id: Ray nodes may share an address
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                name=f"launcher-{node_id}-{id(self)}",
                namespace=NAMESPACE,
            ).remote()
            launcher = self._launchers[node_id] = _Launcher(actor, node_id)
        return launcher

    def launch(self, spec: LaunchSpec) -> None:
        self._port += 1
        lease = _Lease(spec, [], [])
        for rank in spec.ranks:
            launcher = self._launcher(rank.node_id, rank.ip)
            key = f"{spec.lease_id}/{rank.rank}"
            env = rank_env(spec, rank, self._port)
            launcher.actor.start.remote(key, spec.command, spec.workdir, env, spec.log_path)
            lease.keys.append(key)
            lease.nodes.append(rank.node_id)
            self._owner[key] = (spec.lease_id, rank.rank)
        self._leases[spec.lease_id] = lease

    def stop(self, lease_id: str, grace_s: float) -> None:
        lease = self._leases.get(lease_id)
        if lease is None:
            return
        for key, node in zip(lease.keys, lease.nodes, strict=True):
            launcher = self._launchers.get(node)
            if launcher is not None:
                launcher.actor.terminate.remote(key, grace_s)

    def kill(self, lease_id: str) -> None:
        """SIGKILL the lease's processes at once."""
        lease = self._leases.get(lease_id)
        if lease is None:
            return
        for key, node in zip(lease.keys, lease.nodes, strict=True):
            launcher = self._launchers.get(node)
            if launcher is not None:
                launcher.actor.kill.remote(key)

    def reap(self, lease_id: str, ranks: int) -> None:
        """A previous run's launchers died with its driver (and their processes with
        them, PDEATHSIG); ``launch.stop_previous_process`` covers a survivor."""

    def poll(self) -> list[ExitReport]:
        ray = self.ray
        for node, launcher in list(self._launchers.items()):
            if launcher.pending is None:
                self._ask_exits(launcher)
                continue
            done, _ = ray.wait([launcher.pending], timeout=0)
            if not done:
                continue
            try:
                exits = ray.get(launcher.pending)
            except Exception as err:  # the launcher (its node) died
                del self._launchers[node]
                self._lose(node, type(err).__name__)
                continue
            self._ask_exits(launcher)
            for key, code, tail, detail in exits:
                owner = self._owner.pop(key, None)
                if owner is None:
                    continue
                lease = self._leases.get(owner[0])
                if lease is not None:
                    lease.results[lease.keys.index(key)] = (code, tail, False, detail)
        return self._finished()

    def _lose(self, node: str, why: str) -> None:
        for lease in self._leases.values():
            for i, n in enumerate(lease.nodes):
                if n == node and i not in lease.results:
                    self._owner.pop(lease.keys[i], None)
                    lease.results[i] = (None, log_tail(lease.spec.log_path), True, why)

    def _finished(self) -> list[ExitReport]:
        out = []
        for lease_id, lease in list(self._leases.items()):
            if not lease.results:
                continue
            lost = any(r[2] for r in lease.results.values())
            if lost and len(lease.results) < len(lease.keys):
                self.kill(lease_id)  # a gang does not go on with a rank missing
                for i in range(len(lease.keys)):
                    lease.results.setdefault(i, (None, "", True, "gang member lost"))
            if len(lease.results) < len(lease.keys):
                continue
            del self._leases[lease_id]
            results = [lease.results[i] for i in range(len(lease.keys))]
            codes = [r[0] for r in results if r[0] is not None]
            code = next((c for c in codes if c != 0), 0 if codes else None)
            detail = next((r[3] for r in results if r[3]), "")
            out.append(ExitReport(lease_id, code, lost, results[0][1], detail))
        return out

    def shutdown(self) -> None:
        for launcher in self._launchers.values():
            with contextlib.suppress(Exception):
                self.ray.kill(launcher.actor)
        self._launchers.clear()
        self._leases.clear()
