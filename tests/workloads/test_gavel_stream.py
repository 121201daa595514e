"""Gavel's job stream: re-iterable, the same jobs on every pass, picklable mid-stream."""

from __future__ import annotations

import pickle
from itertools import islice

from gpumosaic.workloads.gavel_stream import GavelStream
from gpumosaic.workloads.throughputs import GavelThroughputTable


def test_passes_interleave_and_repeat_the_same_jobs() -> None:
    table = GavelThroughputTable.load()
    stream = GavelStream(3.0, 0, table)
    first = list(islice(iter(stream), 50))
    a, b = iter(stream), iter(stream)
    # b reads ahead of what a has drawn; a then reads what b drew.
    ahead = [next(b) for _ in range(80)]
    again = [next(a) for _ in range(80)]
    assert again == ahead and ahead[:50] == first
    fresh = list(islice(iter(GavelStream(3.0, 0, table)), 80))
    assert fresh == ahead
    assert [j.id for j in fresh] == list(range(80))
    # Pickled without its drawn jobs; the copy draws the same ones.
    copy = pickle.loads(pickle.dumps(stream))
    assert (copy.rate_per_hour, copy.seed) == (3.0, 0)
    assert list(islice(iter(copy), 80)) == fresh


def test_a_bounded_stream_ends() -> None:
    stream = GavelStream(3.0, 1, GavelThroughputTable.load(), jobs=7)
    assert len(list(stream)) == 7 and len(list(stream)) == 7
