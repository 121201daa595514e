"""``gpumosaic serve``'s description: the run description ``simulate`` takes, plus the
fields only a service has (where it listens, its token, its state file, its Ray, its
executor), in one frozen model.

- The decisions are a ``RunDescription`` (``decisions()``): the same mechanism, policy,
  placement, round length, resolve interval, seed and Gandiva options, validated by the
  same checks (each mechanism's ``check``), so what ``simulate`` refuses ``serve`` refuses
  with the same line (``--mechanism gandiva --policy max_min_fairness`` included).
  ``--mechanism gandiva:key=value,...`` is the options' spelling in both commands.
- Defaults that differ from ``simulate``'s are the live column of ``mode_defaults``
  (``--resolve-interval-s`` 0 s; nvshare's anti-thrashing ``auto``), and ``--policy``
  left out is the mechanism's own (``default_policy``: max_min_fairness_perf for the
  rounds, fifo for Gandiva).
- The service's own fields: every number finite and in its documented range, ``--sharing``
  by the share runtime's grammar, a non-loopback address only with a token.
- A live run has no workload file and may read its cluster off Ray: its description's
  ``cluster`` is ``--cluster`` or ``LIVE_CLUSTER``, its ``workload`` is
  ``--target-workload`` (the job list FGD keeps room for) or ``LIVE_WORKLOAD``; neither is
  parsed as ``simulate`` would (``check_inputs`` is not called for it).

Plain Python and pydantic (no numpy, Ray or web server): ``serve`` refuses a mistake in
one line before anything heavy loads; ``run/serve.py`` builds from it (``run.build``).
"""

from __future__ import annotations

import ipaddress
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, model_validator

from gpumosaic.errors import InputError
from gpumosaic.mode_defaults import RESOLVE_INTERVAL_S
from gpumosaic.run.description import RunDescription, input_error
from gpumosaic.runtime.share.spec import parse_live_sharing
from gpumosaic.runtime.timescale import check_time_scale

LIVE_CLUSTER = "ray"  # the cluster is read off Ray when the service starts
LIVE_WORKLOAD = "submitted"  # the jobs come through the API
EXECUTORS = ("ray", "slurm")  # what runs the leases (runtime/executors)


class ServeDescription(BaseModel):
    """Everything that defines one service (see the module doc). Frozen."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    # ---- the decisions (a RunDescription, ``decisions()``) ----------------------------
    # rounds, or gandiva[:key=value,...] (a mechanism with a live driver)
    mechanism: str = "rounds"
    policy: str | None = None  # None: the mechanism's default_policy
    placement: str | None = None  # None: the mechanism's default_placement
    round_s: float = 360.0
    resolve_interval_s: float = RESOLVE_INTERVAL_S.serve  # mode_defaults: 0 s live
    seed: int = 0
    target_workload: str | None = None  # a job list FGD keeps room for
    cluster: str | None = None  # MODEL:COUNT,... (local Ray, or a subset of a cluster)

    # ---- the service's own -------------------------------------------------------------
    grace_s: float = 10.0
    max_retries: int = 2
    state: str = "gpumosaic-state/state.db"
    host: str = "127.0.0.1"
    port: int = 8470
    token: str = ""
    ray_address: str | None = None
    start_timeout_s: float = 120.0
    park_margin_s: float = 30.0
    time_scale: float = 1.0  # job seconds per wall second (runtime/timescale.py)
    warm_launchers: bool = False  # one launcher actor per node (runtime/executors/warm_ray.py)
    ray_timeout_s: float = 30.0  # connecting to Ray (docs/live.md, "Ray connection")
    ray_token_file: str | None = None
    sharing: str | None = None  # --sharing nvshare:... (the share runtime, runtime/share)
    job_user: str = ""  # run jobs as this OS user (the service must run as root)
    executor: str = "ray"  # ray, or slurm (the cluster is Slurm's: docs/slurm.md)
    slurm_conf: str | None = None  # SLURM_CONF of the Slurm commands (None: inherited)
    slurm_partition: str | None = None  # the partition whose nodes (and jobs) are ours

    _decisions: RunDescription | None = PrivateAttr(default=None)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise input_error(err) from None

    @model_validator(mode="after")
    def _check(self) -> ServeDescription:
        _in_range("--round-s", self.round_s, 0.001, 86_400.0)
        _in_range("--resolve-interval-s", self.resolve_interval_s, 0.0, 86_400.0)
        _in_range("--seed", self.seed, 0, 2**63 - 1)
        self._decisions = self._run_description()  # the mechanism's checks, as simulate's
        parse_live_sharing(self.sharing)  # one line naming --sharing, before Ray starts
        if self.cluster:
            from gpumosaic.runtime.cluster import parse_counts

            parse_counts(self.cluster)  # one line naming --cluster
        try:
            check_time_scale(self.time_scale)
        except ValueError as err:
            raise InputError(str(err), field="--time-scale", value=self.time_scale) from None
        _in_range("--grace-s", self.grace_s, 0.0, 3_600.0)
        _in_range("--start-timeout-s", self.start_timeout_s, 0.001, 86_400.0)
        _in_range("--ray-timeout-s", self.ray_timeout_s, 0.1, 3_600.0)
        _in_range("park margin", self.park_margin_s, 0.0, 3_600.0)
        _in_range("--max-retries", self.max_retries, 0, 100)
        _in_range("--port", self.port, 0, 65_535)
        if self.job_user:
            check_job_user(self.job_user)
        self._check_executor()
        if not is_loopback(self.host) and not self.token:
            raise InputError(
                f"listening on {self.host} (not loopback) needs --token (or GPUMOSAIC_TOKEN)",
                field="--host",
            )
        return self

    def _check_executor(self) -> None:
        """``--executor slurm`` reads its cluster from Slurm: no Ray option goes with it."""
        if self.executor not in EXECUTORS:
            raise InputError(
                f"unknown executor (one of {', '.join(EXECUTORS)})",
                field="--executor",
                value=self.executor,
            )
        if self.executor != "slurm":
            for flag, value in (
                ("--slurm-conf", self.slurm_conf),
                ("--slurm-partition", self.slurm_partition),
            ):
                if value:
                    raise InputError("needs --executor slurm", field=flag, value=value)
            return
        given: tuple[tuple[str, object], ...] = (
            ("--cluster", self.cluster),
            ("--ray-address", self.ray_address),
            ("--warm-launchers", self.warm_launchers),
            ("--sharing", self.sharing),
        )
        for flag, option in given:
            if option:
                raise InputError(
                    "does not go with --executor slurm (the cluster is Slurm's)", field=flag
                )

    def _run_description(self) -> RunDescription:
        from gpumosaic.run.registry import get_mechanism

        name = self.mechanism.partition(":")[0].strip().lower()
        mechanism = get_mechanism(name)  # an unknown name: one line naming --mechanism
        if getattr(mechanism, "live_decider", None) is None:
            raise InputError(
                f"the {name} mechanism has no live driver (serve runs rounds or "
                "gandiva[:key=value,...])",
                field="--mechanism",
                value=self.mechanism,
            )
        return RunDescription(
            cluster=self.cluster or LIVE_CLUSTER,
            workload=self.target_workload or LIVE_WORKLOAD,
            mechanism=self.mechanism,
            policy=self.policy if self.policy is not None else mechanism.default_policy,
            placement=self.placement,
            seed=self.seed,
            round_s=self.round_s,
            resolve_interval_s=self.resolve_interval_s,
        )

    def decisions(self) -> RunDescription:
        """The run description of the service's decisions (module doc)."""
        assert self._decisions is not None  # set by the model's own check
        return self._decisions

    @property
    def mechanism_name(self) -> str:
        return self.decisions().resolved_mechanism()

    @property
    def gandiva(self) -> bool:
        return self.decisions().gandiva


def _in_range(flag: str, value: float, low: float, high: float) -> None:
    """Every number of the description is finite and inside its documented range."""
    if not math.isfinite(value) or not low <= value <= high:
        raise InputError(f"must be a number from {low:g} to {high:g}", field=flag, value=value)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_job_user(name: str) -> None:
    """``--job-user``: an existing user, and a service that may start processes as it."""
    import os
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        raise InputError("no such user on this machine", field="--job-user", value=name) from None
    if os.geteuid() != 0:
        raise InputError(
            "running jobs as another user needs the service to run as root",
            field="--job-user",
            value=name,
        )
