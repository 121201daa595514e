"""Servers that leave and come back (``GandivaDecider.take_out`` / ``put_back``): a lost
server's sets close, their jobs go back to the queue (only the running one is
suspended) and are placed on the servers left; nothing is placed on it until it
returns. A hand-written driver, as in ``test_gandiva_decider``."""

from __future__ import annotations

from test_gandiva_decider import decider, job, v100s

from gpumosaic.mechanisms.gandiva import Resume, Start, Suspend


def test_a_lost_servers_jobs_are_requeued_and_placed_elsewhere() -> None:
    d = decider(v100s(2, 1), max_share=4)
    for i in range(4):  # two per server, time-sliced
        d.admit(job(i), 0.0)
    lost = d.sets[0].node
    on_lost = sorted(j.id for g in d.sets if g.node == lost for j in g.jobs())
    step = d.take_out({lost}, 10.0)
    suspended = [a.job_id for a in step.actions if isinstance(a, Suspend)]
    assert len(suspended) == 1 and suspended[0] in on_lost  # the running one only
    assert not any(isinstance(a, Resume) for a in step.actions)
    # Placed again on the server left (time-sliced there), never on the lost one.
    placed = [a for a in step.actions if isinstance(a, Start)]
    assert sorted(a.job_id for a in placed) == on_lost
    assert all(a.node != lost for a in placed)
    assert d.state.gpu_free[lost].sum() == 0 and d.away == {lost}
    d.sets.check()
    assert d.sets.away_milli == 1000  # neither free nor held
    # Back: free again; nothing waits in the queue, and without migration the
    # time-sliced jobs stay where they are.
    step = d.put_back({lost}, 20.0)
    assert d.away == set() and d.sets.away_milli == 0 and step.actions == ()
    assert d.state.gpu_free[lost].sum() == 1000
    d.sets.check()


def test_a_job_that_arrives_while_its_only_server_is_away_waits() -> None:
    d = decider(v100s(1, 1))
    d.take_out({0}, 0.0)
    assert d.admit(job(0), 1.0).actions == ()  # admitted (the server may return), waits
    assert [j.id for j in d.queue] == [0]
    (start,) = d.put_back({0}, 2.0).actions
    assert isinstance(start, Start) and start.job_id == 0
