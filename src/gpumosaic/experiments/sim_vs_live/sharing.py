"""``sim-vs-live --sharing nvshare:tq=S[,anti_thrashing=on|off|auto]``: the live service
runs with its share runtime and the simulator with the nvshare model, from one spec.

- The spec is checked by both sides' parsers (``serve``'s ``runtime/share/supervisor.py`` and
  ``simulate``'s ``sharing/speed.py``), so it is one both accept: ``tq`` and
  ``anti_thrashing`` (``at``); keys only one side has (``mem_cap``, ``grace``,
  ``jobs_per_gpu``) are refused by the other.
- ``tq`` is **job time**, like ``--round-s``: the simulator's quantum is ``tq`` and the
  live daemons get ``tq / time scale`` wall seconds (at least the daemon's 0.01 s).
- The live side: ``serve --sharing`` launches every job with gpu_milli < 1000 under the
  interposer and its GPU's daemon; an emulated job then steps through the stand-in
  libcuda (``runtime/emulate.py``, ``run_shared``), so the quanta really serialize it.
- The simulator: the nvshare model (``NvshareModel``) on each GPU's company every round
  (``mechanisms/rounds/sim/sharing.py``), with ``jobs_per_gpu=1`` (only the workload's fractional
  jobs share, as live), the interposer's idle release (5 wall seconds) in job time, and
  the hand-over cost the live run measured (``handover_cost``) instead of the model's
  0.1 s real-GPU default.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpumosaic.errors import InputError
from gpumosaic.model.job import JobSpec
from gpumosaic.runtime.share import limits
from gpumosaic.runtime.share.supervisor import parse_sharing, share_socket_dir
from gpumosaic.sharing.lock import AntiThrashing
from gpumosaic.sharing.nvshare import NvshareModel
from gpumosaic.sharing.speed import NvshareSpeed, build_speed_model

FLAG = "--sharing"
INTERPOSER_IDLE_S = 5.0  # GPUMOSAIC_SHARE_IDLE_S's default (interposer.c), wall seconds


@dataclass(frozen=True, slots=True)
class SimVsLiveSharing:
    """The validated ``--sharing`` of a sim-vs-live run."""

    spec: str  # as given
    tq_s: float  # job time
    anti_thrashing: AntiThrashing

    def live_spec(self, time_scale: float) -> str:
        """``serve --sharing`` for the live side: the quantum in wall seconds."""
        wall = self.tq_s / time_scale
        if wall < limits.TQ_MIN_S:
            raise InputError(
                f"tq={self.tq_s:g} s of job time is {wall:.3g} wall seconds at time scale "
                f"{time_scale:.4g}, under the share daemon's {limits.TQ_MIN_S:g} s: raise tq "
                "or lower --time-scale",
                field=FLAG,
            )
        return f"nvshare:tq={wall!r},anti_thrashing={self.anti_thrashing.value}"

    def speed(self, time_scale: float, handover_s: float) -> NvshareSpeed:
        """The simulator's sharing model: ``handover_s`` (job time) per hand-over."""
        model = NvshareModel(
            tq_s=self.tq_s,
            anti_thrashing=self.anti_thrashing,
            handover_s=handover_s,
            idle_release_s=INTERPOSER_IDLE_S * time_scale,
        )
        return NvshareSpeed(model, jobs_per_gpu=1)


def parse(text: str | None) -> SimVsLiveSharing | None:
    """``None``/``none``: no sharing; else a spec both sides accept (see module doc)."""
    if text is None or text.strip().lower() in ("", "none"):
        return None
    try:
        live = parse_sharing(text)
    except InputError as err:
        raise InputError(f"serve (the live side) refuses it: {err.message}", field=FLAG) from None
    assert live is not None
    if live.mem_cap_share or live.mem_cap_mib is not None:
        raise InputError(
            "mem_cap is serve's alone (the simulator has no allocations): drop it",
            field=FLAG,
        )
    try:
        sim = build_speed_model(text)
    except InputError as err:
        raise InputError(
            f"simulate (the simulator's side) refuses it: {err.message}", field=FLAG
        ) from None
    if not isinstance(sim, NvshareSpeed):  # pragma: no cover - serve took nvshare only
        raise InputError(f"sim-vs-live shares with nvshare:tq=S[,...], got {text!r}", field=FLAG)
    return SimVsLiveSharing(text, sim.model.tq_s, sim.model.mode)


def check_jobs(jobs: Sequence[JobSpec]) -> None:
    """The emulated jobs allocate no GPU memory: a declared working set would be seen by
    the simulator alone (``auto`` would serialize there and not live)."""
    for job in jobs:
        if job.gpu_memory_mib:
            raise InputError(
                f"job {job.id} declares gpu_memory_mib, but emulated jobs allocate no GPU "
                "memory, so only the simulator would see it: drop the column for "
                "sim-vs-live --sharing",
                field="--workload",
            )


@dataclass(frozen=True, slots=True)
class HandoverStats:
    """Hand-overs the live daemons made and their cost: the time nobody held the GPU
    while the new holder waited for it (from the later of the previous holder's release
    and the new holder's request to the grant: the daemon's part; the new holder's
    wake-up, well under a millisecond, is not in its log), wall seconds."""

    handovers: int
    mean_gap_wall_s: float

    def job_s(self, time_scale: float) -> float:
        return 0.0 if math.isnan(self.mean_gap_wall_s) else self.mean_gap_wall_s * time_scale


def handover_stats(state_path: str) -> HandoverStats:
    """Read the daemons' event logs of the service whose state file is ``state_path``
    (after it stopped), then remove its socket directory."""
    sock_dir = share_socket_dir(state_path)
    gaps: list[float] = []
    handovers = 0
    for log in sorted(sock_dir.glob("events-gpu*.jsonl")):
        released: float | None = None
        asked: dict[object, float] = {}
        for line in log.read_text().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut by a daemon's death
            kind, t, who = event.get("event"), event.get("t_ns", 0) / 1e9, event.get("client")
            if kind in ("LOCK_RELEASED", "LOCK_REVOKED", "DISCONNECT"):
                released = t
            elif kind == "REQ_LOCK":
                asked[who] = t
            elif kind == "LOCK_OK" and event.get("handover"):
                handovers += 1
                if released is not None:
                    gaps.append(max(0.0, t - max(released, asked.get(who, released))))
                released = None
    shutil.rmtree(sock_dir, ignore_errors=True)
    return HandoverStats(handovers, statistics.fmean(gaps) if gaps else math.nan)


@dataclass(frozen=True, slots=True)
class SharingRun:
    """What a sim-vs-live run with ``--sharing`` reports of it (``Comparison.sharing``)."""

    sharing: SimVsLiveSharing
    live_tq_wall_s: float
    live: HandoverStats
    sim_handover_s: float  # job time, what the simulator was given

    def sim_json(self) -> dict[str, object]:
        return {
            "spec": self.sharing.spec,
            "tq_s": self.sharing.tq_s,
            "anti_thrashing": self.sharing.anti_thrashing.value,
            "handover_s": self.sim_handover_s,
        }

    def live_json(self) -> dict[str, object]:
        gap = self.live.mean_gap_wall_s
        return {
            "spec": self.sharing.spec,
            "tq_wall_s": self.live_tq_wall_s,
            "handovers": self.live.handovers,
            "handover_gap_wall_s": None if math.isnan(gap) else gap,
        }

    def line(self) -> str:
        gap = self.live.mean_gap_wall_s
        gap_text = "-" if math.isnan(gap) else f"{1e3 * gap:.3f} ms wall"
        return (
            f"sharing {self.sharing.spec}: tq {self.sharing.tq_s:g} s job = "
            f"{self.live_tq_wall_s:.4g} s wall, anti-thrashing {self.sharing.anti_thrashing}; "
            f"live hand-overs {self.live.handovers} (gap {gap_text}); simulator's hand-over "
            f"{self.sim_handover_s:.4g} s job"
        )


def measured_run(
    sharing: SimVsLiveSharing, time_scale: float, state_path: str
) -> tuple[SharingRun, NvshareSpeed]:
    """After the live run: its hand-overs, and the simulator's model with their cost."""
    stats = handover_stats(state_path)
    handover = stats.job_s(time_scale)
    run = SharingRun(sharing, sharing.tq_s / time_scale, stats, handover)
    return run, sharing.speed(time_scale, handover)
