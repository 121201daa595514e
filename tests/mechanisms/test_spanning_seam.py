"""One job list through every simulated mechanism (issue 32, "each rule in one home"):
a job that fits only across servers, one that fits nowhere and a one-GPU one end the
same way under ``event``, ``rounds`` and ``gandiva``: admission is
``mechanisms/admission.py`` and a spanning job is placed by ``placement/gang.py``
everywhere. (Failed and cancelled jobs exist only live:
``gandiva/live/test_gandiva_nodes_and_gangs.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumosaic.results.outcome import RejectReason
from gpumosaic.results.result import JobStatus
from gpumosaic.run.build import run
from gpumosaic.run.description import RunDescription

MECHANISMS = {"event": "fifo", "rounds": "max_min_fairness", "gandiva": "fifo"}
JOBS = (
    "arrival_s,job_type,num_gpu,steps,may_span_nodes\n"
    "0,ResNet-18 (batch size 64),4,500,true\n"  # spans: 4 GPUs on servers of 2
    "0,ResNet-18 (batch size 64),8,500,true\n"  # never fits: 8 GPUs of 4
    "0,ResNet-18 (batch size 64),4,500,false\n"  # may not span: never fits
    "0,ResNet-18 (batch size 64),1,500,false\n"
)


def _ends(tmp_path: Path, mechanism: str) -> dict[int, tuple[JobStatus, RejectReason | None]]:
    path = tmp_path / "jobs.csv"
    path.write_text(JOBS)
    description = RunDescription(
        cluster="v100:4",
        gpus_per_node=2,
        workload=str(path),
        mechanism=mechanism,
        policy=MECHANISMS[mechanism],
    )
    return {r.job_id: (r.status, r.rejection) for r in run(description).result.records}


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_one_job_list_ends_the_same_under_every_mechanism(tmp_path: Path, mechanism: str) -> None:
    assert _ends(tmp_path, mechanism) == {
        0: (JobStatus.COMPLETED, None),
        1: (JobStatus.REJECTED, RejectReason.NEVER_FITS),
        2: (JobStatus.REJECTED, RejectReason.NEVER_FITS),
        3: (JobStatus.COMPLETED, None),
    }
