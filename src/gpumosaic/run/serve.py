"""``gpumosaic serve``: the store, the lease table, the mechanism's live driver, an
executor and the HTTP server, wired together and run until stopped.

The decision objects come from the service's description (``ServeDescription``) on the
road ``simulate`` takes (``run.build.build_live_parts``), and the mechanism's plug-in
builds its decider from them (``live_decider``): for the rounds the policy with the run's
seeded Generator, the placement against the target workload, the ``RoundDecider`` with
the same ``RoundConfig`` and the two Generators spawned from the seed; for Gandiva its
decider with the queue order, the placement (``--placement``; Gandiva's own affinity
order by default) and the options.
"""

from __future__ import annotations

import os
import resource
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from gpumosaic.mechanisms.rounds.decision import RoundPlan
from gpumosaic.mechanisms.rounds.live.decider import (
    LiveRoundDecider,
    PriorThroughputs,
    estimation_metrics,
)
from gpumosaic.mechanisms.rounds.live.driver import RoundDriver
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.run.serve_description import ServeDescription
from gpumosaic.run.serve_start import (
    bind_api,
    connect_ray,
    connect_slurm,
    executor_for,
    node_watcher,
    open_state,
    start_adoption,
    state_dir,
)
from gpumosaic.runtime.api.http_guard import GuardLimits
from gpumosaic.runtime.auth import Authority
from gpumosaic.runtime.cluster import LiveCluster
from gpumosaic.runtime.executors.contract import Executor
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.runtime.share.supervisor import ShareSupervisor, ShareView
from gpumosaic.runtime.state.fencing import StateLock
from gpumosaic.runtime.state.health import PROBE_EVERY_S, StateHealth
from gpumosaic.runtime.state.records import JobRow
from gpumosaic.runtime.state.store import StateUnwritable, Store
from gpumosaic.runtime.supervisor.config import DriverConfig
from gpumosaic.runtime.supervisor.nodes import NODE_POLL_S, NodeWatcher

if TYPE_CHECKING:
    from gpumosaic.mechanisms.contract import LiveParts
    from gpumosaic.mechanisms.gandiva import GandivaDecider
    from gpumosaic.mechanisms.gandiva.live.driver import GandivaDriver

__all__ = [
    "ServeDescription",
    "Service",
    "bind_api",
    "build_decider",
    "check_names",
    "connect_ray",
    "connect_slurm",
    "open_state",
    "state_dir",
]

# FGD needs the workload it should keep room for. Without --target-workload the service
# assumes an even mix of the shapes users submit most (a whole GPU, half, a quarter, two
# GPUs): an assumption, not a measurement; pass a job list to use your own mix.
DEFAULT_TARGET = (
    (1, 1000),
    (1, 500),
    (1, 250),
    (2, 1000),
)


def target_jobs(path: str | None) -> list[JobSpec]:
    """The jobs whose shapes the placement keeps room for: ``--target-workload``'s job
    list, or ``DEFAULT_TARGET``."""
    if path:
        from gpumosaic.traces.joblist import load_job_list

        return list(load_job_list(path).jobs)
    return [
        JobSpec(id=i, arrival_s=0.0, job_type="job", num_gpu=n, gpu_milli=m, work=1.0)
        for i, (n, m) in enumerate(DEFAULT_TARGET)
    ]


def live_parts(config: ServeDescription, cluster: LiveCluster | None) -> LiveParts:
    """The decision objects (``run.build.build_live_parts``) on the live cluster (or,
    before Ray is up, on the ``--cluster`` models, to check the names)."""
    from gpumosaic.run.build import build_live_parts

    if cluster is not None:
        spec = cluster.spec
    else:
        from gpumosaic.model.cluster import ClusterSpec
        from gpumosaic.runtime.cluster import parse_counts

        spec = ClusterSpec.from_counts(parse_counts(config.cluster or "v100:1"), gpus_per_node=1)
    return build_live_parts(config.decisions(), spec, target_jobs(config.target_workload))


def check_names(config: ServeDescription) -> None:
    """Fail on a policy, placement, target workload or cluster mistake before Ray is
    started (the objects are built and dropped)."""
    live_parts(config, None)


def build_live_decider(config: ServeDescription, cluster: LiveCluster) -> object:
    """The mechanism's decider over the service's parts (its plug-in's ``live_decider``)."""
    from gpumosaic.mechanisms.contract import ServedMechanism
    from gpumosaic.run.registry import get_mechanism

    mechanism = cast(ServedMechanism, get_mechanism(config.mechanism_name))
    return mechanism.live_decider(live_parts(config, cluster))


def build_decider(
    config: ServeDescription, cluster: LiveCluster
) -> tuple[LiveRoundDecider, PriorThroughputs]:
    """The rounds' decider and its prior rates (``build_live_decider``)."""
    decider = build_live_decider(config, cluster)
    assert isinstance(decider, LiveRoundDecider), "the rounds' decider"
    return decider, cast(PriorThroughputs, decider.throughputs)


class LoopDriver(Protocol):
    """What the service loop needs of a driver (``RoundDriver``, ``GandivaDriver``)."""

    config: DriverConfig

    @property
    def lease_of(self) -> dict[int, str]: ...

    def boundary(self, now: float) -> object: ...

    def tick(self, now: float) -> None: ...

    def round_over(self, now: float) -> bool: ...

    def wait(self, poll_s: float) -> None: ...

    def shutdown(self) -> None: ...


class Service:
    """One running service. ``start()`` returns once the API answers; ``stop()`` ends it."""

    def __init__(
        self,
        config: ServeDescription,
        cluster: LiveCluster,
        executor_factory: Callable[[LeaseTable], Executor] | None = None,
        clock: Callable[[], float] = time.time,
        on_plan: Callable[[RoundPlan], None] | None = None,
        state: tuple[StateLock, Store] | None = None,
        listener: socket.socket | None = None,
    ) -> None:
        from gpumosaic.runtime.timescale import ScaledClock

        if config.time_scale != 1.0 and clock is time.time:
            clock = ScaledClock(config.time_scale)
        self.config = config
        self.cluster = cluster
        self.clock = clock
        self.authority = Authority(config.token)
        self.guard_limits = GuardLimits()  # bytes and connections held (http_guard)
        self.park_margin_s = config.park_margin_s * config.time_scale  # wall seconds kept
        self.default_retries = config.max_retries
        self.data_dir = state_dir(config)
        self.lock, self.store = state if state is not None else open_state(config)
        self._listener = listener
        self.state_health = StateHealth(self.store.probe_write, config.state)
        self.table = LeaseTable(self.store, clock)
        self.executor: Executor
        # The executor (Ray's, or --executor slurm's: run/serve_start.py), or a test's.
        if executor_factory is None:
            self.executor = executor_for(config, cluster, self.table, self.data_dir)
        else:
            self.executor = executor_factory(self.table)
        # --sharing: fractional jobs under the share runtime (runtime/share/supervisor.py)
        self.sharing: ShareSupervisor | None = share_executor(self)
        # The mechanism's decider, by its plug-in over the description's parts.
        self.gandiva = config.gandiva  # --mechanism gandiva: its driver runs, not the rounds'
        self.gandiva_decider: GandivaDecider | None = None
        if self.gandiva:
            self.gandiva_decider = cast("GandivaDecider", build_live_decider(config, cluster))
            # The /ui page is the rounds' view until Gandiva has its own: it reads an idle
            # rounds decider (no job is ever admitted to it).
            self.decider, self.priors = build_decider(_rounds_view_of(config), cluster)
        else:
            self.decider, self.priors = build_decider(config, cluster)
        self.on_plan = on_plan
        # Node membership (runtime/supervisor/nodes.py): Ray's or Slurm's nodes.
        self.nodes: NodeWatcher | None = None
        if executor_factory is None:
            self.nodes = node_watcher(config, cluster, NODE_POLL_S * config.time_scale)
        self.driver: RoundDriver | None = None
        # --mechanism gandiva: this driver runs instead (``driver`` stays None).
        self.gandiva_driver: GandivaDriver | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._server: Any = None
        self.url = ""
        self.max_gpus = self._max_gpus()
        self.total_gpu_milli = cluster.spec.num_gpus * MILLI_PER_GPU
        self.driver_error: BaseException | None = None

    # ---- what the API asks ---------------------------------------------------------

    def _max_gpus(self) -> dict[str, int]:
        return self.cluster.spec.gpus_per_model()

    def check_fits(self, sub: JobSubmission) -> tuple[str, str] | None:
        models = [m.upper() for m in sub.gpu_models] or list(self.max_gpus)
        present = [m for m in models if m in self.max_gpus]
        if not present:
            have = ", ".join(sorted(self.max_gpus))
            return "gpu_models", f"the cluster has none of {', '.join(models)} (it has {have})"
        most = max(self.max_gpus[m] for m in present)
        if sub.gpus > most:
            return "gpus", f"asks for {sub.gpus} GPUs; at most {most} of one allowed model exist"
        return None

    def health_problem(self) -> str | None:
        """Why the service is not healthy (its round loop died, its state cannot be
        written: ``state_health``), or None. The state is probed with a real write at
        most once a second."""
        err = self.driver_error
        if err is not None:
            return f"round loop stopped: {type(err).__name__}: {err}"
        return self.state_health.check()

    def live_steps(self, job: JobRow) -> float:
        if job.lease_id is not None:
            lease = self.table.get(job.lease_id)
            if lease is not None:
                return lease.steps
        return job.steps_done

    def live_attained_s(self, job: JobRow) -> float:
        """GPU seconds credited at round ends plus those held in the current round so far
        (from the later of the round's start and the job's first lease call)."""
        if self.gandiva_driver is not None:  # credited at each lease's end, plus the live one
            return job.attained_s + self.gandiva_driver.held_gpu_s(job.id)
        driver = self.driver
        if driver is None:
            return job.attained_s
        held = driver.meter.held_gpu_s(
            job.id, self.clock(), self.table.get, job.num_gpu * job.gpu_milli
        )
        return job.attained_s + held

    def packed_with(self, job_id: int) -> int | None:
        """The job it shares its GPUs with now: a packed pair of the rounds (Gandiva's
        own pairs are in its table)."""
        return None if self.driver is None else self.driver.packed_with_of(job_id)

    def share_view(self, job: JobRow) -> ShareView | None:
        if self.sharing is None:
            return None
        return self.sharing.view(job.id, job.gpu_milli, job.num_gpu)

    def log_path(self, job_id: int) -> str:
        return str(self.data_dir / "logs" / f"job-{job_id}.log")

    def metrics(self) -> dict[str, float]:
        shares = self.sharing.metrics() if self.sharing is not None else {}  # --sharing
        if self.gandiva_driver is not None:
            return {
                **self.gandiva_driver.metrics(),
                "rss_bytes": _rss_bytes(),
                **shares,
                **self.state_health.metrics(),
            }
        d = self.driver
        if d is None:
            return {}
        c, p = d.counters, d.process_counters
        book = self.decider.book
        last = c.boundary_s[-1] if c.boundary_s else 0.0
        return {
            "rounds_total": c.rounds,
            "leases_launched_total": p.launches,
            "lease_extensions_total": c.extensions,
            "lease_stops_total": p.stops,
            "leases_lost_total": p.lost,
            "job_retries_total": p.retries,
            "forced_solves_total": c.forced_solves,
            "unmeasured_grants_total": c.unmeasured_grants,
            "placement_failures_total": self.decider.leases.failures,
            "policy_solves_total": book.solves,
            "fallbacks_total": sum(n for _, n in book.fallbacks.counts),
            **{f"fallback_{kind.value}_total": n for kind, n in book.fallbacks.counts},
            "policy_solve_seconds_total": book.solve_s,
            **estimation_metrics(self.decider),
            "round_decision_seconds": last,
            "rss_bytes": _rss_bytes(),
            **(self.nodes.metrics() if self.nodes is not None else {}),
            **shares,
            **self.state_health.metrics(),
        }

    # ---- life cycle ----------------------------------------------------------------

    def start(self) -> None:
        import uvicorn

        from gpumosaic.runtime.api.app import create_app
        from gpumosaic.runtime.api.http_guard import guarded_config
        from gpumosaic.runtime.timescale import ScaledClock

        if self.gandiva:  # each mechanism's own /ui view
            from gpumosaic.mechanisms.gandiva.ui import ui_router
        else:
            from gpumosaic.mechanisms.rounds.ui import ui_router
        app = create_app(self, ui=ui_router)
        listener = self._listener if self._listener is not None else bind_api(self.config)
        self._listener = None
        uv_config = guarded_config(
            app,
            self.guard_limits,
            host=self.config.host,
            port=self.config.port,
            log_level="warning",
            lifespan="off",
        )
        self._server = uvicorn.Server(uv_config)
        self._server.install_signal_handlers = lambda: None
        server = self._server
        server_thread = threading.Thread(
            target=lambda: server.run(sockets=[listener]), name="gpumosaic-api", daemon=True
        )
        server_thread.start()
        self._threads.append(server_thread)
        give_up = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > give_up or not server_thread.is_alive():
                raise RuntimeError(
                    f"the API did not start on {self.config.host}:{self.config.port}"
                )
            time.sleep(0.02)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        host = self.config.host if self.config.host not in ("0.0.0.0", "::") else "127.0.0.1"
        self.url = f"http://{host}:{port}"
        self.lock.describe(self.url)
        driver_config = DriverConfig(
            round_s=self.config.round_s,
            grace_s=self.config.grace_s,
            max_retries=self.config.max_retries,
            server_url=self.url,
            token=self.config.token,
            data_dir=str(self.data_dir),
            time_scale=self.config.time_scale,
            job_user=self.config.job_user,
        )
        if self.gandiva:
            from gpumosaic.mechanisms.gandiva.live.driver import GandivaDriver

            assert self.gandiva_decider is not None
            self.gandiva_driver = GandivaDriver(
                self.store,
                self.table,
                self.executor,
                self.gandiva_decider,
                self.cluster,
                driver_config,
                clock=self.clock,
                nodes=self.nodes,
            )
            self.gandiva_driver.recover()
        else:
            self.driver = RoundDriver(
                self.store,
                self.table,
                self.executor,
                self.decider,
                self.cluster,
                self.priors,
                driver_config,
                clock=self.clock,
                on_plan=self.on_plan,
                hold=self.clock.held if isinstance(self.clock, ScaledClock) else None,
                nodes=self.nodes,
            )
            self.driver.recover()
        loop = threading.Thread(target=self._loop, name="gpumosaic-rounds", daemon=True)
        loop.start()
        self._threads.append(loop)
        adopting = start_adoption(self.config, self.store, self.clock, self.check_fits, self._stop)
        if adopting is not None:  # --slurm-partition: users' sbatch jobs (docs/slurm.md)
            self._threads.append(adopting)

    def loop_driver(self) -> LoopDriver | None:
        return self.gandiva_driver if self.gandiva_driver is not None else self.driver

    def _loop(self) -> None:
        driver = self.loop_driver()
        assert driver is not None
        due = True  # a boundary is due
        try:
            while not self._stop.is_set():
                try:
                    if due:
                        driver.boundary(self.clock())
                        due = False
                    driver.tick(self.clock())
                except StateUnwritable as err:  # nothing changed: wait, then try again
                    self.state_health.lost(err.__cause__ or err)
                    self._stop.wait(PROBE_EVERY_S)
                    continue
                if driver.round_over(self.clock()):
                    due = True
                    continue
                driver.wait(driver.config.poll_s)
        except BaseException as err:  # surfaced by /healthz and the CLI, never swallowed
            self.driver_error = err
            raise

    def stop(self, *, stop_jobs: bool = True) -> None:
        self._stop.set()
        for t in self._threads[1:]:  # the round loop: it must not decide while we stop
            t.join(timeout=10)
        driver = self.loop_driver()
        if driver is not None and stop_jobs:
            driver.shutdown()
            give_up = time.monotonic() + self.config.grace_s + 5
            while driver.lease_of and time.monotonic() < give_up:
                driver.tick(self.clock())
                time.sleep(0.05)
        if self._server is not None:
            self._server.should_exit = True
        for t in self._threads:
            t.join(timeout=10)
        self.executor.shutdown()
        self.store.close()
        self.lock.release()

    def request_stop(self) -> None:
        self._stop.set()

    def wait(self) -> None:
        """Block until interrupted (the ``serve`` command)."""
        try:
            while not self._stop.is_set():
                if self.driver_error is not None:
                    raise self.driver_error
                self._stop.wait(0.5)
        except KeyboardInterrupt:
            pass


def _rounds_view_of(config: ServeDescription) -> ServeDescription:
    """The rounds' description the /ui view of a Gandiva service reads (see ``Service``)."""
    values = config.model_dump()
    return ServeDescription(**{**values, "mechanism": "rounds", "policy": None, "placement": None})


def share_executor(service: Service) -> ShareSupervisor | None:
    """With ``--sharing``, start the share daemons on every node (through Ray) and wrap
    the service's executor so fractional jobs run under the interposer; the supervisor
    (None without sharing)."""
    from gpumosaic.runtime.share.supervisor import (
        SharedExecutor,
        parse_sharing,
        share_socket_dir,
    )

    sharing = parse_sharing(service.config.sharing)
    if sharing is None:
        return None
    supervisor = ShareSupervisor(sharing, service.cluster, share_socket_dir(service.config.state))
    supervisor.start()
    service.executor = SharedExecutor(service.executor, supervisor)
    return supervisor


def _rss_bytes() -> int:
    try:
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
