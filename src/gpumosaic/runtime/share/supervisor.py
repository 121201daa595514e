"""``serve --sharing nvshare:tq=S[,anti_thrashing=auto][,mem_cap=on]``: fractional jobs
under the share runtime (docs/share.md, "Live sharing under serve").

- ``parse_sharing`` builds the share settings from the flag's grammar
  (``runtime/share/spec.py``: the typed ``key=value`` parser and the daemon's own bounds);
- ``ShareSupervisor`` runs one ``NodeShareAgent`` Ray actor per Ray node (pinned to it),
  which starts one share daemon per GPU of the node and restarts one that dies; the
  supervisor re-creates an agent that is lost and collects the hand-overs per job;
- ``SharedExecutor`` wraps the service's executor: a job with ``gpu_milli < 1000`` is
  launched with the interposer (``LD_PRELOAD``), its GPU's daemon socket, its name
  (``job-<id>``) and, with ``mem_cap``, its memory cap. Whole-GPU jobs run as before.

The supervisor is driven by the round driver's ticks (``SharedExecutor.poll``), so it has
no thread of its own; what the API reads (``share_view``) is an immutable snapshot.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.runtime.cluster import LiveCluster
from gpumosaic.runtime.executors.contract import Executor, ExitReport, LaunchSpec
from gpumosaic.runtime.share.native import ShareError
from gpumosaic.runtime.share.node import DaemonSettings, NodeShareAgent, NodeShareReport
from gpumosaic.runtime.share.sockets import default_socket_dir, socket_path
from gpumosaic.runtime.share.spec import FLAG, parse_live_sharing
from gpumosaic.sharing.lock import AntiThrashing

NAMESPACE = "gpumosaic"  # as the lease actors' (ray_executor.NAMESPACE)
AGENT_START_TIMEOUT_S = 120.0  # a Ray actor and its daemons on a loaded machine (not measured)
REPORT_INTERVAL_S = 0.5  # how often the supervisor asks the agents (hand-overs, restarts)


@dataclass(frozen=True, slots=True)
class LiveSharing:
    """The validated ``--sharing`` of a service."""

    settings: DaemonSettings
    mem_cap_share: bool  # cap each job at its gpu_milli/1000 of the GPU's memory
    mem_cap_mib: float | None  # or at this many MiB

    def job_env(self, job_id: int, gpu_milli: int, socket: Path, interposer: str) -> dict[str, str]:
        """The variables a shared job's process gets (LD_PRELOAD is added by the caller,
        in front of any the job asked for)."""
        env = {
            "GPUMOSAIC_SHARE_SOCKET": str(socket),
            "GPUMOSAIC_SHARE_NAME": f"job-{job_id}",
        }
        if self.mem_cap_mib is not None:
            env["GPUMOSAIC_SHARE_MEM_CAP_MIB"] = f"{self.mem_cap_mib:g}"
        elif self.mem_cap_share:
            env["GPUMOSAIC_SHARE_MEM_CAP_MILLI"] = str(gpu_milli)
        return env


def parse_sharing(text: str | None) -> LiveSharing | None:
    """``--sharing`` (``runtime/share/spec.py``'s grammar) -> the service's share settings;
    None without sharing. A mistake is one ``InputError`` naming ``--sharing``."""
    options = parse_live_sharing(text)
    if options is None:
        return None
    return LiveSharing(
        DaemonSettings(options.tq, AntiThrashing.parse(options.anti_thrashing), options.grace),
        mem_cap_share=options.mem_cap_share,
        mem_cap_mib=options.mem_cap_mib,
    )


def is_shared(gpu_milli: int, num_gpu: int) -> bool:
    """A job the runtime shares: a fraction of one GPU."""
    return num_gpu <= 1 and 0 < gpu_milli < MILLI_PER_GPU


def share_socket_dir(state: str) -> Path:
    """The socket directory of the service whose state file is ``state``, the same path
    on every node: two services on one machine never share daemons."""
    digest = hashlib.sha256(os.path.abspath(state).encode()).hexdigest()[:10]
    return default_socket_dir() / f"serve-{digest}"


@dataclass(frozen=True, slots=True)
class ShareView:
    """What ``jobs --json`` shows of a job's sharing."""

    shared: bool
    handovers: int  # times the daemon handed the GPU to the job from another holder
    grants: int  # times the daemon granted the job the GPU


@dataclass(slots=True)
class _Agent:
    node_id: str
    gpus: tuple[int, ...]
    actor: Any
    pending: Any = None  # an outstanding report() call
    asked_at: float = 0.0
    last: NodeShareReport | None = None


class ShareSupervisor:
    """One agent per Ray node (see module doc). ``start`` blocks until every daemon
    answers; ``poll`` never blocks."""

    def __init__(self, sharing: LiveSharing, cluster: LiveCluster, socket_dir: Path) -> None:
        import ray

        self.ray = ray
        self.sharing = sharing
        self.socket_dir = socket_dir
        gpus: dict[str, list[int]] = {}
        for i, (node, slot) in enumerate(zip(cluster.spec.nodes, cluster.slots, strict=True)):
            gpus.setdefault(slot.ray_node_id, []).extend(cluster.devices(i, range(node.num_gpus)))
        self._node_gpus = {n: tuple(sorted(set(g))) for n, g in gpus.items()}
        remote: Any = ray.remote  # its stubs lack the actor options
        self._agent_cls = remote(num_cpus=0, max_restarts=0, max_concurrency=4)(NodeShareAgent)
        self._agents: dict[str, _Agent] = {}
        self._interposer: dict[str, str] = {}  # Ray node id -> interposer path there
        self.agent_restarts = 0
        self._views: Mapping[str, tuple[int, int]] = {}  # name -> (handovers, grants)
        self._restarts: Mapping[tuple[str, int], int] = {}
        # Jobs launched under the runtime by share rather than by their own gpu_milli
        # (Gandiva's one-GPU jobs, packable beside a partner: mechanisms/gandiva/live/driver.py).
        self._launched_shared: set[int] = set()

    def _name(self, node_id: str) -> str:
        return f"share-{self.socket_dir.name}-{node_id[:16]}"

    def _create(self, node_id: str) -> tuple[_Agent, Any]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        name = self._name(node_id)
        with contextlib.suppress(ValueError):  # one a previous run of the service left
            self.ray.kill(self.ray.get_actor(name, namespace=NAMESPACE))
        actor = self._agent_cls.options(
            name=name,
            namespace=NAMESPACE,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(str(self.socket_dir), self._node_gpus[node_id], self.sharing.settings)
        return _Agent(node_id, self._node_gpus[node_id], actor), actor.start.remote()

    def start(self) -> None:
        started = {}
        for node_id in self._node_gpus:
            agent, ref = self._create(node_id)
            self._agents[node_id] = agent
            started[node_id] = ref
        for node_id, ref in started.items():
            try:
                _, interposer = self.ray.get(ref, timeout=AGENT_START_TIMEOUT_S)
            except Exception as err:
                self.stop()
                cause = err.cause if hasattr(err, "cause") and err.cause is not None else err
                raise ShareError(
                    f"{FLAG}: the share daemons of Ray node {node_id[:12]} did not start: "
                    f"{type(cause).__name__}: {cause}"
                ) from None
            self._interposer[node_id] = interposer

    def shared_spec(self, spec: LaunchSpec) -> LaunchSpec:
        """``spec`` with the share runtime's variables, when its job is shared."""
        if len(spec.ranks) != 1 or not spec.ranks[0].devices:
            return spec
        if not is_shared(spec.gpu_milli, len(spec.ranks)):
            return spec
        rank = spec.ranks[0]
        interposer = self._interposer.get(rank.node_id)
        if interposer is None:  # a node the service was not started with
            return spec
        # The runtime's variables are the service's to set: a job's own (a larger cap,
        # another socket) are dropped.
        env = {k: v for k, v in spec.env if not k.startswith("GPUMOSAIC_SHARE_")}
        env.update(
            self.sharing.job_env(
                spec.job_id,
                spec.gpu_milli,
                socket_path(self.socket_dir, rank.devices[0]),
                interposer,
            )
        )
        env["LD_PRELOAD"] = ":".join(p for p in (interposer, env.get("LD_PRELOAD", "")) if p)
        self._launched_shared.add(spec.job_id)
        return dataclasses.replace(spec, env=tuple(sorted(env.items())))

    def poll(self, now: float | None = None) -> None:
        """Ask every agent for its report (at most every REPORT_INTERVAL_S) and take the
        answers that are in; an agent that is gone is created again."""
        t = time.monotonic() if now is None else now
        for node_id, agent in list(self._agents.items()):
            if agent.pending is None:
                if t - agent.asked_at >= REPORT_INTERVAL_S:
                    agent.pending = agent.actor.report.remote()
                    agent.asked_at = t
                continue
            done, _ = self.ray.wait([agent.pending], timeout=0)
            if not done:
                continue
            ref, agent.pending = agent.pending, None
            try:
                agent.last = self.ray.get(ref)
            except Exception:  # the actor died (its daemons with it): start another
                self.agent_restarts += 1
                fresh, start_ref = self._create(node_id)
                fresh.pending = start_ref  # its first answer is start()'s
                fresh.asked_at = t
                self._agents[node_id] = fresh
                continue
            if isinstance(agent.last, tuple):  # start()'s answer
                agent.last = None
        self._snapshot()

    def _snapshot(self) -> None:
        views: dict[str, tuple[int, int]] = {}
        restarts: dict[tuple[str, int], int] = {}
        for node_id, agent in self._agents.items():
            report = agent.last
            if report is None:
                continue
            grants = dict(report.grants)
            for name, n in grants.items():
                h, g = views.get(name, (0, 0))
                views[name] = (h + dict(report.handovers).get(name, 0), g + n)
            for gpu, n in report.restarts:
                restarts[(node_id, gpu)] = n
        self._views = views  # replaced whole: the API thread reads it without a lock
        self._restarts = restarts

    def wait_reports(self, timeout_s: float = 10.0) -> bool:
        """Poll until every agent has answered once more (tests, the CLI at exit); False
        when one had not within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        asked = {n: a.asked_at for n, a in self._agents.items()}
        while time.monotonic() < deadline:
            self.poll()
            if all(
                a.pending is None and a.asked_at > asked.get(n, 0) and a.last is not None
                for n, a in self._agents.items()
            ):
                return True
            time.sleep(0.05)
        return False

    def view(self, job_id: int, gpu_milli: int, num_gpu: int) -> ShareView:
        handovers, grants = self._views.get(f"job-{job_id}", (0, 0))
        shared = is_shared(gpu_milli, num_gpu) or job_id in self._launched_shared
        return ShareView(shared, handovers, grants)

    def daemon_restarts(self) -> int:
        return sum(self._restarts.values())

    def metrics(self) -> dict[str, float]:
        """The service's ``/metrics`` lines of the runtime (nothing it recovers from is
        silent)."""
        views = self._views
        return {
            "share_daemon_restarts_total": self.daemon_restarts(),
            "share_agent_restarts_total": self.agent_restarts,
            "share_handovers_total": sum(h for h, _ in views.values()),
            "share_lock_grants_total": sum(g for _, g in views.values()),
        }

    def agents(self) -> dict[str, Any]:
        """The agent actor of each Ray node (fault tests kill daemons through it)."""
        return {n: a.actor for n, a in self._agents.items()}

    def stop(self) -> None:
        for agent in self._agents.values():
            with contextlib.suppress(Exception):
                self.ray.get(agent.actor.stop.remote(), timeout=15)
            with contextlib.suppress(Exception):
                self.ray.kill(agent.actor)
        self._agents.clear()


class SharedExecutor:
    """The service's executor, with shared jobs launched under the share runtime and the
    supervisor driven by the driver's polls (see module doc)."""

    def __init__(self, inner: Executor, supervisor: ShareSupervisor) -> None:
        self.inner = inner
        self.supervisor = supervisor

    def launch(self, spec: LaunchSpec) -> None:
        self.inner.launch(self.supervisor.shared_spec(spec))

    def stop(self, lease_id: str, grace_s: float) -> None:
        self.inner.stop(lease_id, grace_s)

    def poll(self) -> list[ExitReport]:
        self.supervisor.poll()
        return self.inner.poll()

    def reap(self, lease_id: str, ranks: int) -> None:
        self.inner.reap(lease_id, ranks)

    def shutdown(self) -> None:
        self.inner.shutdown()
        self.supervisor.stop()
