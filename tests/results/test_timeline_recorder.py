"""TimelineRecorder: typed columns, the last sample of an instant kept, arrays once."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gpumosaic.results.result import TimelineRecorder

sample = st.tuples(
    st.integers(0, 5).map(float),  # few distinct times: repeats happen
    st.floats(0, 1e6, allow_nan=False),
    st.integers(0, 100),
    st.integers(0, 100),
    st.floats(0, 1) | st.just(math.nan),
    st.floats(0, 1e6, allow_nan=False),
    st.floats(0, 1e6, allow_nan=False),
)


@given(st.lists(sample, max_size=30).map(lambda rows: sorted(rows, key=lambda r: r[0])))
def test_freeze_equals_the_rows_with_one_per_instant(rows) -> None:
    recorder = TimelineRecorder()
    expected: list[tuple[float, ...]] = []
    for row in rows:
        recorder.record(*row)
        if expected and expected[-1][0] == row[0]:
            expected[-1] = row
        else:
            expected.append(row)
    timeline = recorder.freeze()
    assert len(recorder) == len(expected)
    columns = list(zip(*expected, strict=True)) if expected else [()] * 7
    fields = (
        "time_s",
        "allocated_milli",
        "running",
        "queued",
        "fragmentation_rate",
        "power_gpu_w",
        "power_cpu_w",
    )
    for name, column in zip(fields, columns, strict=True):
        values = getattr(timeline, name)
        dtype = np.int64 if name in ("running", "queued") else np.float64
        assert values.dtype == dtype
        np.testing.assert_array_equal(values, np.asarray(column, dtype=dtype))
