"""How the supervisor runs leases on a wall clock: round length, grace periods, retries,
where logs and checkpoints live, the service's URL and time scale. Every live driver
(rounds, Gandiva) runs its leases under one ``DriverConfig``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class DriverConfig:
    round_s: float = 360.0
    grace_s: float = 10.0  # SIGTERM -> SIGKILL
    max_retries: int = 2  # a failing job runs at most 1 + max_retries times
    poll_s: float = 0.05
    # At the round's end, wait up to this long (wall seconds) for the plan's running
    # leases to park: their grants end at the round's end, and their last report carries
    # the round's last steps (without it they would be credited to the next round).
    park_wait_s: float = 1.0
    # A lease's process is a failed attempt (stopped, then retried or failed) when it
    # makes no lease call within ``start_grace_s`` of its launch, or none for
    # ``report_grace_s`` while it runs (jobs report at least once a second; a parked
    # lease waiting for its round decision is not silent). Wall seconds.
    start_grace_s: float = 300.0
    report_grace_s: float = 120.0
    server_url: str = "http://127.0.0.1:8470"
    token: str = ""
    data_dir: str = "."  # logs/ and checkpoints/ live under it
    time_scale: float = 1.0  # job seconds per wall second (runtime/timescale.py)
    job_user: str = ""  # --job-user: the OS user the jobs run as ('' for Ray's own)

    @property
    def checkpoint_root(self) -> Path:
        return Path(self.data_dir) / "checkpoints"

    @property
    def log_root(self) -> Path:
        return Path(self.data_dir) / "logs"
