"""Admission's one rule for every mechanism: can this job ever run on this cluster?

``ever_fits(state, job, spans=...)`` answers None (it can) or the typed refusal:

- it fits some server when the cluster is empty (``ClusterState.fits_when_empty``): yes;
- else, where the mechanism places a job across servers (``spans``: the event mechanism
  with an ideal speed model, Gavel's rounds, Gandiva) and the job may span them
  (``JobSpec.may_span_nodes``), enough GPUs of one usable model in all (``could_span``):
  yes;
- else ``SPANS_SERVERS`` when only spanning could hold it (a sharing model that does not
  model spanning), and
  ``NEVER_FITS`` with the filter's own words otherwise.

The event, rounds and Gandiva deciders all ask it, so a job gets the same answer, or
the same typed refusal, under every mechanism that can run it the same way.
"""

from __future__ import annotations

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.filter import explain
from gpumosaic.placement.gang import could_span
from gpumosaic.results.outcome import Rejection, RejectReason


def ever_fits(
    state: ClusterState,
    job: JobSpec,
    *,
    spans: bool,
    usable: np.ndarray | None = None,
    why_not_span: str = "",
) -> Rejection | None:
    """None if ``job`` can ever run on ``state``'s cluster, else why not (module doc).
    ``usable``: a mask over the nodes whose GPU model gives the job a speed (the rounds':
    a model at rate 0 never runs it); ``why_not_span``: the mechanism's reason it does not
    span servers, for the refusal's words."""
    if state.fits_when_empty(job):
        return None
    if job.may_span_nodes and could_span(state, job, usable):
        if spans:
            return None
        return Rejection(
            RejectReason.SPANS_SERVERS,
            f"{job.num_gpu} GPUs fit only across servers, and {why_not_span}",
        )
    return Rejection(RejectReason.NEVER_FITS, explain(state, job).detail)
