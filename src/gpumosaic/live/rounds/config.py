"""``gpumosaic serve``'s configuration and its one validation: every number finite and in
its documented range, ``--sharing`` and ``--mechanism`` by their grammars, a non-loopback
address only with a token. Plain Python (no numpy, Ray or web server), so ``serve``
refuses a mistake in one line before anything heavy loads; ``service.py`` builds from it.
"""

from __future__ import annotations

import ipaddress
import math
import os
from dataclasses import dataclass

from gpumosaic.errors import InputError
from gpumosaic.live.rounds.timescale import check_time_scale
from gpumosaic.live.share.spec import parse_live_sharing
from gpumosaic.mechanisms.gandiva.config import (
    GandivaConfig,
    GandivaOptionError,
    parse_gandiva_options,
)


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    policy: str = "max_min_fairness_perf"
    placement: str = "fgd"
    round_s: float = 360.0
    resolve_interval_s: float = 0.0  # re-solve at any boundary where jobs came or went
    grace_s: float = 10.0
    max_retries: int = 2
    state: str = "gpumosaic-state/state.db"
    host: str = "127.0.0.1"
    port: int = 8470
    token: str = ""
    ray_address: str | None = None
    cluster: str | None = None  # MODEL:COUNT,... (local Ray, or a subset of a cluster)
    seed: int = 0
    target_workload: str | None = None
    start_timeout_s: float = 120.0
    park_margin_s: float = 30.0
    time_scale: float = 1.0  # job seconds per wall second (live/rounds/timescale.py)
    warm_launchers: bool = False  # one launcher actor per node (live/rounds/warm_executor.py)
    ray_timeout_s: float = 30.0  # connecting to Ray (docs/live.md, "Ray connection")
    ray_token_file: str | None = None
    sharing: str | None = None  # --sharing nvshare:... (live/rounds/sharing.py)
    # "rounds" (Gavel's rounds), or "gandiva[:key=value,...]" (live/gandiva; the keys of
    # --sharing gandiva:..., docs/gandiva.md "Gandiva live").
    mechanism: str = "rounds"
    job_user: str = ""  # run jobs as this OS user (the service must run as root)

    def __post_init__(self) -> None:
        parse_live_sharing(self.sharing)  # one line naming --sharing, before Ray starts
        try:
            check_time_scale(self.time_scale)
        except ValueError as err:
            raise InputError(str(err), field="--time-scale", value=self.time_scale) from None
        _in_range("--round-s", self.round_s, 0.001, 86_400.0)
        _in_range("--grace-s", self.grace_s, 0.0, 3_600.0)
        _in_range("--resolve-interval-s", self.resolve_interval_s, 0.0, 86_400.0)
        _in_range("--start-timeout-s", self.start_timeout_s, 0.001, 86_400.0)
        _in_range("--ray-timeout-s", self.ray_timeout_s, 0.1, 3_600.0)
        _in_range("park margin", self.park_margin_s, 0.0, 3_600.0)
        _in_range("--max-retries", self.max_retries, 0, 100)
        _in_range("--port", self.port, 0, 65_535)
        _in_range("--seed", self.seed, 0, 2**63 - 1)
        if self.mechanism != "rounds":
            gandiva_config(self.mechanism)
        if self.job_user:
            check_job_user(self.job_user)
        if not is_loopback(self.host) and not self.token:
            raise InputError(
                f"listening on {self.host} (not loopback) needs --token (or GPUMOSAIC_TOKEN)",
                field="--host",
            )


def check_job_user(name: str) -> None:
    """``--job-user``: an existing user, and a service that may start processes as it."""
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


def gandiva_config(mechanism: str) -> GandivaConfig:
    """``--mechanism gandiva[:key=value,...]`` -> the decider's config; anything else is
    one line naming ``--mechanism``."""
    name = mechanism.partition(":")[0].strip().lower()
    if name != "gandiva":
        raise InputError(
            "must be rounds or gandiva[:key=value,...]", field="--mechanism", value=mechanism
        )
    try:
        return parse_gandiva_options(mechanism)
    except GandivaOptionError as err:
        raise InputError(str(err), field="--mechanism", value=mechanism) from None


def _in_range(flag: str, value: float, low: float, high: float) -> None:
    """Every number of the configuration is finite and inside its documented range."""
    if not math.isfinite(value) or not low <= value <= high:
        raise InputError(f"must be a number from {low:g} to {high:g}", field=flag, value=value)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
