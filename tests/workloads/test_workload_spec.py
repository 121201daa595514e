import pytest

from gpumosaic.errors import InputError
from gpumosaic.workloads.spec import parse_cluster, parse_workload


def test_cluster_counts_and_gpus_per_node() -> None:
    spec = parse_cluster("v100:36,p100:36,k80:36")
    assert spec.gpus_per_model() == {"V100": 36, "P100": 36, "K80": 36}
    assert len(spec.nodes) == 108
    assert len(parse_cluster("v100:12", gpus_per_node=4).nodes) == 3


def test_gpus_per_node_that_leaves_a_partial_server_is_refused() -> None:
    with pytest.raises(InputError, match="v100:10 does not divide into servers of 4 GPUs"):
        parse_cluster("v100:10", gpus_per_node=4)


@pytest.mark.parametrize("text", ["v100", "v100:x", "h900:4", ""])
def test_bad_cluster_specs(text: str) -> None:
    with pytest.raises(InputError, match="--cluster"):
        parse_cluster(text)


def test_gavel_workload_options() -> None:
    parsed = parse_workload("gavel:jobs=50,rate=0,milli=spatial", seed=0)
    jobs = list(parsed.workload.jobs)
    assert len(jobs) == 50 and {j.arrival_s for j in jobs} == {0.0}
    window = parse_workload("gavel:rate=3.0,window=4000-5000", seed=0).workload
    assert window.measure == (4000, 5000)
    assert window.is_measured(4000) and not window.is_measured(5000)


@pytest.mark.parametrize(
    "text, message",
    [
        ("gavel:jobs=5,colour=red", "gavel workload option 'colour' is not an option"),
        ("gavel:jobs=5,milli=half", "milli: expected one of spatial, none"),
        ("gavel:window=10", "window: expected a range A-B"),
        ("gavel:rate=-1,jobs=3", "rate must be"),
        ("gavel:multigpu=maybe,jobs=3", "multigpu: expected on or off"),
        ("parquet:x", "unknown workload"),
    ],
)
def test_bad_workload_specs(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_workload(text, seed=0)


def test_gavel_stream_spelling_is_gavels_job_stream_with_a_window() -> None:
    from itertools import islice

    from gpumosaic.errors import InputError
    from gpumosaic.workloads.gavel_stream import gavel_stream_workload
    from gpumosaic.workloads.spec import parse_workload

    parsed = parse_workload("gavel-stream:rate=3,window=2-5", seed=1).workload
    direct = gavel_stream_workload(3.0, (2, 5), 1)
    assert parsed.measure == (2, 5)
    assert list(islice(parsed.jobs, 8)) == list(islice(direct.jobs, 8))
    for bad in ("gavel-stream:window=2-5", "gavel-stream:rate=3", "gavel-stream:rate=3,window=9"):
        try:
            parse_workload(bad, seed=0)
        except InputError as err:
            assert err.field == "--workload"
        else:
            raise AssertionError(f"{bad} was accepted")
