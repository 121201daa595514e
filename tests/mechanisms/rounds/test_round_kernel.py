"""The compiled round arithmetic against the formulas written in numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumosaic.mechanisms.rounds.round_kernel import grant_steps


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(1e-4, 50.0),  # steps/s (below 1/360: less than a step a round)
            st.floats(0.0, 1e5),  # total steps
            st.floats(0.0, 1.0),  # fraction done
        ),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from([1.0, 360.0, 1e-3]),
)
def test_granted_steps_are_gavels_int_of_a_round_capped_by_what_is_left(jobs, round_s):
    rate = np.array([r for r, _, _ in jobs])
    total = np.array([t for _, t, _ in jobs])
    done = total * np.array([f for _, _, f in jobs])
    rows = np.arange(len(jobs))[::-1].copy()
    whole = np.floor(rate[::-1] * round_s)
    per_round = np.where(whole >= 1.0, whole, rate[::-1] * round_s)
    expected = np.minimum(per_round, (total - done)[rows])
    got = grant_steps(rate[::-1].copy(), rows, total, done, round_s)
    np.testing.assert_array_equal(got, expected)
