"""``sim-vs-live --mechanism gandiva`` end to end on the test run's Ray: four Gavel jobs
at t = 0 on 2 V100s (Gandiva packs two pairs), time scale 100 (a 600 s quantum and trial
in 6 s of wall time), emulated jobs that step at their pair's rate while packed. What this
size agrees to: the average JCT within 20 % (docs/gandiva.md has the full-size check)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumosaic.experiments.sim_vs_live.gandiva import compare_gandiva
from gpumosaic.experiments.sim_vs_live.inputs import SimVsLiveOptions
from gpumosaic.run.description import RunDescription

WORKLOAD = Path(__file__).parent / "jobs" / "sim_vs_live_gandiva.yaml"


@pytest.mark.slow
def test_gandiva_live_agrees_with_its_simulation(ray_cluster: object, tmp_path: Path) -> None:
    description = RunDescription(cluster="v100:2", workload=str(WORKLOAD), policy="fifo")
    lines: list[str] = []
    c = compare_gandiva(
        SimVsLiveOptions(description, time_scale=100.0, wall_limit_s=120.0),
        "gandiva:quantum=600,profile=600",
        say=lines.append,
        state_dir=tmp_path / "state",
    )
    data = c.to_json()
    assert c.live_finished, lines
    assert c.sim.completed == c.live.completed == 4
    assert abs(c.avg_jct_rel_diff) <= 0.20, data
    # Both sides packed; the live side's counts are what its driver executed.
    assert c.sim_counts.packs >= 1 and c.live_counts.packs >= 1, data
    # The simulator was given the costs this live run measured.
    assert c.start.samples >= 2 and c.config.start_s == c.start.mean_s > 0
    assert set(data) == {
        "sim", "live", "avg_jct_rel_diff", "makespan_rel_diff", "per_job_rel_diff_median",
        "per_job_rel_diff_p90", "rounds_identical", "time_scale", "wall_s",
    }  # fmt: skip
    assert data["rounds_identical"] is None
    for side in ("sim", "live"):
        assert {"suspensions", "migrations", "packs", "avg_jct_s"} <= set(data[side])  # type: ignore[arg-type]


def test_a_quantum_too_short_for_the_time_scale_names_the_flag() -> None:
    from gpumosaic.errors import InputError

    description = RunDescription(cluster="v100:2", workload=str(WORKLOAD), policy="fifo")
    with pytest.raises(InputError) as err:
        compare_gandiva(SimVsLiveOptions(description, time_scale=1000.0), "gandiva:quantum=60")
    assert "--mechanism" in str(err.value) and "quantum=2000" in str(err.value)


def test_a_window_is_replayed_up_to_its_last_measured_job() -> None:
    # Gandiva's two sides end with the window's jobs (the rounds comparison replays the
    # stream on past it); a stream cut at 2,000 jobs made the scale 5,000 and refused.
    from gpumosaic.experiments.sim_vs_live.gandiva import gandiva_description, replayed_jobs
    from gpumosaic.run.build import build_parts

    description = RunDescription(
        cluster="v100:2,p100:2", workload="gavel:rate=0.5,window=4-14", policy="fifo"
    )
    parts = build_parts(gandiva_description(description, "gandiva:quantum=7200"))
    assert [j.id for j in replayed_jobs(parts)] == list(range(14))


def test_live_rows_keep_their_ends_as_the_simulators_records(tmp_path: Path) -> None:
    """sim-vs-live's Gandiva side: a failed and a cancelled job stay failed and cancelled
    (they were "queued"), and a rejection keeps its typed reason and its words."""
    from types import SimpleNamespace

    from gpumosaic.experiments.sim_vs_live.gandiva_live import _live_result
    from gpumosaic.fallbacks import Fallbacks
    from gpumosaic.model.job import JobSpec
    from gpumosaic.results.outcome import JobEnd, Outcome, Rejection, RejectReason
    from gpumosaic.results.result import JobStatus
    from gpumosaic.runtime.jobs.submission import JobSubmission
    from gpumosaic.runtime.state.store import Store

    store = Store(tmp_path / "state.db")
    sub = JobSubmission(command="x", steps=10)
    done, failed, cancelled, rejected = store.add_jobs([sub] * 4, 100.0, default_retries=0)
    for job in (done, failed, cancelled):
        store.mark_running(job, f"L{job}", "V100", "0", 101.0)
    for job, state in ((done, "done"), (failed, "failed")):
        store.process_ended(
            job, state=state, steps_done=10, attempts=1, exit_code=0, log_tail="",
            reason="exit code 1" if state == "failed" else "", now=111.0,
        )  # fmt: skip
    store.finish(cancelled, JobEnd(Outcome.CANCELLED, None, "cancelled by the user"), 105.0)
    never = Rejection(RejectReason.NEVER_FITS, "asks for 9 GPUs")
    store.finish(rejected, JobEnd.rejected(never), 100.0)
    rows = store.jobs()
    store.close()

    specs = [JobSpec(10 + i, 0.0, "t", num_gpu=1, gpu_milli=1000, work=10) for i in range(4)]
    driver = SimpleNamespace(
        epoch=100.0,
        decider=SimpleNamespace(state=SimpleNamespace(total_gpu_milli=1000), fallbacks=Fallbacks()),
    )
    id_of = {done: 10, failed: 11, cancelled: 12, rejected: 13}
    result = _live_result(rows, driver, id_of, specs, wall_s=1.0)  # type: ignore[arg-type]
    by_id = {r.job_id: r for r in result.records}
    assert [by_id[i].status for i in (10, 11, 12, 13)] == [
        JobStatus.COMPLETED,
        JobStatus.FAILED,
        JobStatus.CANCELLED,
        JobStatus.REJECTED,
    ]
    assert by_id[13].rejection is RejectReason.NEVER_FITS
    assert by_id[13].reason == str(never)
    assert by_id[11].reason == "exit code 1"
    assert by_id[10].jct_s == pytest.approx(11.0)  # job time from its arrival at 0
    assert result.end_s == pytest.approx(11.0)  # the last completion
