"""``gpumosaic serve``: the store, the lease table, the round driver, an executor and the
HTTP server, wired together and run until stopped.

The decision objects are built exactly as the simulator builds them (``sim/rounds.py``):
the policy from the policy registry with the run's seeded Generator, the placement from
the placement registry with a target workload, the ``RoundDecider`` with the same
``RoundConfig`` and the two Generators spawned from the seed.
"""

from __future__ import annotations

import logging
import os
import resource
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from gpumosaic.errors import InputError
from gpumosaic.live.rounds.auth import Authority
from gpumosaic.live.rounds.cluster import (
    LiveCluster,
    discover,
    local_ray_resources,
    parse_counts,
    ray_nodes,
)
from gpumosaic.live.rounds.config import ServiceConfig, gandiva_config
from gpumosaic.live.rounds.decider import LiveRoundDecider, PriorThroughputs, estimation_metrics
from gpumosaic.live.rounds.driver import DriverConfig, RoundDriver
from gpumosaic.live.rounds.executor import Executor
from gpumosaic.live.rounds.fencing import StateLock
from gpumosaic.live.rounds.http_guard import GuardLimits
from gpumosaic.live.rounds.leases import LeaseTable
from gpumosaic.live.rounds.nodes import NODE_POLL_S, NodeWatcher
from gpumosaic.live.rounds.records import JobRow
from gpumosaic.live.rounds.sharing import ShareSupervisor, ShareView
from gpumosaic.live.rounds.state_health import PROBE_EVERY_S, StateHealth
from gpumosaic.live.rounds.store import StateUnwritable, Store
from gpumosaic.live.rounds.submission import JobSubmission
from gpumosaic.mechanisms.gandiva import (
    GandivaDecider,
)
from gpumosaic.mechanisms.rounds.decision import RoundPlan
from gpumosaic.mechanisms.rounds.estimation import ThroughputEstimation
from gpumosaic.model.job import JobSpec
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.policies.ordering import build_queue_order
from gpumosaic.run.parts import RoundParts, build_round_parts
from gpumosaic.workloads.throughputs import GavelThroughputTable

if TYPE_CHECKING:
    from gpumosaic.live.gandiva.driver import GandivaDriver

# FGD needs the workload it should keep room for. Without --target-workload the service
# assumes an even mix of the shapes users submit most (a whole GPU, half, a quarter, two
# GPUs): an assumption, not a measurement; pass a job list to use your own mix.
LOCAL_RAY_START_S = 120.0  # the least time a local Ray may take to start (not a measurement)
DEFAULT_TARGET = (
    (1, 1000),
    (1, 500),
    (1, 250),
    (2, 1000),
)


def build_gandiva_decider(config: ServiceConfig, cluster: LiveCluster) -> GandivaDecider:
    """The decider the simulator builds (``sim/gandiva``): FIFO, Gandiva's own server
    order, the run's seeded Generator; speeds from Gavel's table or the live prior."""
    from gpumosaic.live.gandiva.throughputs import LiveThroughputs

    return GandivaDecider(
        cluster.spec,
        LiveThroughputs.load(),
        gandiva_config(config.mechanism),
        np.random.default_rng(config.seed),
        order=build_queue_order("fifo"),
    )


def connect_ray(config: ServiceConfig, stop: threading.Event | None = None) -> LiveCluster:
    """Join ``--ray-address``, use an already connected Ray, or start a local one with
    the ``--cluster`` models as logical GPUs; then read the cluster off Ray. Bounded by
    ``--ray-timeout-s`` and ended early by ``stop`` (``ray_connect``)."""
    import ray

    from gpumosaic.live.rounds.ray_connect import bounded_init, init_local_ray, use_token_file

    declared = parse_counts(config.cluster) if config.cluster else None
    if not ray.is_initialized():
        if config.ray_token_file:
            use_token_file(config.ray_token_file)
        if config.ray_address:
            address = config.ray_address

            def init() -> None:
                ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        else:
            if declared is None:
                raise InputError(
                    "local Ray needs the GPU models: --cluster MODEL:COUNT,... (e.g. v100:2,k80:2)",
                    field="--cluster",
                )
            num_gpus, resources = local_ray_resources(declared)

            def init() -> None:
                init_local_ray(  # loopback only
                    num_gpus=num_gpus,
                    resources=resources,
                    logging_level=logging.ERROR,
                    log_to_driver=False,
                )

        bounded_init(
            init,
            address=config.ray_address,
            # Starting a local Ray takes ~10 s on an idle laptop, far more on a loaded one.
            timeout_s=config.ray_timeout_s
            if config.ray_address
            else max(config.ray_timeout_s, LOCAL_RAY_START_S),
            stop=stop or threading.Event(),
            log_path=state_dir(config) / "ray-connect.log",
            shutdown=ray.shutdown,
        )
    return discover(ray_nodes(ray.nodes()), declared)


def state_dir(config: ServiceConfig) -> Path:
    state = Path(config.state)
    return state.parent if state.parent != Path("") else Path(".")


def open_state(config: ServiceConfig) -> tuple[StateLock, Store]:
    """The state file, locked for this process and checked writable; a second service,
    a damaged or a read-only file is one ``InputError`` line naming ``--state``."""
    path = Path(config.state)
    if path.exists() and not path.is_file():
        raise InputError("is not a file", field="--state", value=config.state)
    lock = StateLock.acquire(path)
    try:
        store = Store(path)
    except sqlite3.Error as err:
        lock.release()
        raise InputError(
            f"cannot open it as a gpumosaic state file: {err}", field="--state", value=config.state
        ) from None
    try:
        store.probe_write()
    except sqlite3.Error as err:
        store.close()
        lock.release()
        raise InputError(f"cannot write it: {err}", field="--state", value=config.state) from None
    return lock, store


def bind_api(config: ServiceConfig) -> socket.socket:
    """The API's listening socket, bound now (before Ray starts), so that a port in use
    is one line and no work is done."""
    try:
        return socket.create_server((config.host, config.port))
    except OSError as err:
        why = err.strerror or str(err)
        if err.errno == 98:  # EADDRINUSE
            why = "address already in use (another gpumosaic serve? pick --port)"
        raise InputError(
            f"cannot listen on {config.host}:{config.port}: {why}",
            field="--port",
            value=config.port,
        ) from None


def target_workload(path: str | None) -> TargetWorkload:
    if path:
        from gpumosaic.traces.joblist import load_job_list

        return TargetWorkload.from_jobs(load_job_list(path).jobs)
    jobs = [
        JobSpec(id=i, arrival_s=0.0, job_type="job", num_gpu=n, gpu_milli=m, work=1.0)
        for i, (n, m) in enumerate(DEFAULT_TARGET)
    ]
    return TargetWorkload.from_jobs(jobs)


def check_names(config: ServiceConfig) -> None:
    """Fail on a policy, placement or cluster mistake before Ray is started."""
    build_parts_of(config)
    if config.cluster:
        parse_counts(config.cluster)


def build_decider(
    config: ServiceConfig, cluster: LiveCluster
) -> tuple[LiveRoundDecider, PriorThroughputs]:
    """The policy, placement and decider, built by the road the simulator takes
    (``run.parts.build_round_parts``)."""
    parts = build_parts_of(config)
    table = GavelThroughputTable.load()
    priors = PriorThroughputs(table)
    decider = LiveRoundDecider(
        cluster.spec,
        parts.policy,
        parts.placement,
        priors,
        parts.config,
        parts.shuffle_rng,
        parts.place_rng,
        estimation=ThroughputEstimation(cluster.spec.gpu_models, table),
    )
    return decider, priors


def build_parts_of(config: ServiceConfig) -> RoundParts:
    target = target_workload(config.target_workload)
    return build_round_parts(
        config.policy,
        config.placement,
        target,
        config.seed,
        config.round_s,
        config.resolve_interval_s,
    )


class LoopDriver(Protocol):
    """What the service loop needs of a driver (``RoundDriver``, ``GandivaDriver``)."""

    config: DriverConfig
    lease_of: dict[int, str]

    def boundary(self, now: float) -> object: ...

    def tick(self, now: float) -> None: ...

    def round_over(self, now: float) -> bool: ...

    def wait(self, poll_s: float) -> None: ...

    def shutdown(self) -> None: ...


class Service:
    """One running service. ``start()`` returns once the API answers; ``stop()`` ends it."""

    def __init__(
        self,
        config: ServiceConfig,
        cluster: LiveCluster,
        executor_factory: Callable[[LeaseTable], Executor] | None = None,
        clock: Callable[[], float] = time.time,
        on_plan: Callable[[RoundPlan], None] | None = None,
        state: tuple[StateLock, Store] | None = None,
        listener: socket.socket | None = None,
    ) -> None:
        from gpumosaic.live.rounds.timescale import ScaledClock

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
        if executor_factory is None and config.warm_launchers:
            from gpumosaic.live.rounds.warm_executor import WarmRayExecutor

            warm = WarmRayExecutor(wake=self.table.changed)
            warm.warm(sorted({(s.ray_node_id, s.ip) for s in cluster.slots}))
            self.executor: Executor = warm
        elif executor_factory is None:
            from gpumosaic.live.rounds.ray_executor import RayExecutor

            self.executor = RayExecutor(config.start_timeout_s)
        else:
            self.executor = executor_factory(self.table)
        # --sharing: fractional jobs under the share runtime (live/rounds/sharing.py)
        self.sharing: ShareSupervisor | None = share_executor(self)
        self.decider, self.priors = build_decider(config, cluster)
        self.on_plan = on_plan
        # Ray node membership (live/rounds/nodes.py), followed where jobs run on Ray.
        self.nodes: NodeWatcher | None = None
        if executor_factory is None:
            self.nodes = NodeWatcher(cluster, every_s=NODE_POLL_S * config.time_scale)
        self.driver: RoundDriver | None = None
        # --mechanism gandiva: this driver runs instead (``driver`` stays None).
        self.gandiva = config.mechanism != "rounds"
        self.gandiva_driver: GandivaDriver | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._server: Any = None
        self.url = ""
        self.max_gpus = self._max_gpus()
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
        c = d.counters
        book = self.decider.book
        last = c.boundary_s[-1] if c.boundary_s else 0.0
        return {
            "rounds_total": c.rounds,
            "leases_launched_total": c.launches,
            "lease_extensions_total": c.extensions,
            "lease_stops_total": c.stops,
            "leases_lost_total": c.lost,
            "job_retries_total": c.retries,
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

        from gpumosaic.live.rounds.api import create_app
        from gpumosaic.live.rounds.http_guard import guarded_config
        from gpumosaic.live.rounds.timescale import ScaledClock

        app = create_app(self)
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
            from gpumosaic.live.gandiva.driver import GandivaDriver

            self.gandiva_driver = GandivaDriver(
                self.store,
                self.table,
                self.executor,
                build_gandiva_decider(self.config, self.cluster),
                self.cluster,
                driver_config,
                clock=self.clock,
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


def share_executor(service: Service) -> ShareSupervisor | None:
    """With ``--sharing``, start the share daemons on every node (through Ray) and wrap
    the service's executor so fractional jobs run under the interposer; the supervisor
    (None without sharing)."""
    from gpumosaic.live.rounds.sharing import SharedExecutor, parse_sharing, share_socket_dir

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
