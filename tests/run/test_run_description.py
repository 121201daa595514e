"""RunDescription: one validated model for the CLI, sweeps and experiment files."""

from __future__ import annotations

import pickle

import pytest

from gpumosaic.errors import InputError
from gpumosaic.experiments.runner import RunRequest
from gpumosaic.run.description import RunDescription

BASE = {"cluster": "v100:4", "workload": "gavel:jobs=4,rate=0"}


@pytest.mark.parametrize(
    ("values", "flag"),
    [
        ({"round_s": 0}, "--round-s"),
        ({"resolve_interval_s": -1}, "--resolve-interval-s"),
        ({"seed": -2}, "--seed"),
        ({"gpus_per_node": 0}, "--gpus-per-node"),
        ({"mechanism": "tetris"}, "--mechanism"),
        ({"policy": "tetris"}, "--policy"),
        ({"placement": "tetris"}, "--placement"),
        ({"placement": "affinity"}, "--placement"),
        ({"policy": "max_min_fairness", "mechanism": "event"}, "--policy"),
        ({"sharing": "gandiva", "mechanism": "rounds"}, "--mechanism"),
        ({"sharing": "gandiva:packing=maybe"}, "--sharing"),
        ({"mechanism": "gandiva", "sharing": "capped"}, "--sharing"),
        ({"round_s": "soon"}, "--round-s"),
        ({"rounds": 3}, "--rounds"),
        ({"cluster": " "}, "--cluster"),
        ({"estimate_throughputs": True}, "--estimate-throughputs"),  # the event mechanism
    ],
)
def test_every_bad_field_names_its_option(values: dict[str, object], flag: str) -> None:
    for build in (lambda v: RunDescription(**v), RunDescription.model_validate):
        with pytest.raises(InputError) as caught:
            build({**BASE, **values})
        assert caught.value.field == flag, str(caught.value)


def test_the_old_name_builds_the_same_validated_value() -> None:
    request = RunRequest(cluster="v100:4", workload="gavel:jobs=4,rate=0", policy="sjf", seed=3)
    same = RunDescription.from_values({**BASE, "policy": "sjf", "seed": 3})
    assert request == same and hash(request) == hash(same)
    assert pickle.loads(pickle.dumps(request)) == request  # sweeps send it to workers
    assert request.resolved_mechanism() == "event" and request.resolved_placement() == "fgd"
    assert list(request.to_json()) == [
        "cluster",
        "workload",
        "policy",
        "placement",
        "seed",
        "gpus_per_node",
        "mechanism",
        "backfill",
        "round_s",
        "resolve_interval_s",
        "sharing",
        "background",
        "estimate_throughputs",
    ]


@pytest.mark.parametrize(
    ("values", "mechanism", "placement"),
    [
        ({}, "event", "fgd"),
        ({"policy": "max_min_fairness"}, "rounds", "fgd"),
        ({"sharing": "gandiva:packing=on"}, "gandiva", "affinity"),
        ({"mechanism": "gandiva"}, "gandiva", "affinity"),
        ({"mechanism": "rounds", "policy": "fifo"}, "rounds", "fgd"),
    ],
)
def test_mechanism_and_placement_resolve(
    values: dict[str, object], mechanism: str, placement: str
) -> None:
    description = RunDescription(**BASE, **values)
    assert description.resolved_mechanism() == mechanism
    assert description.resolved_placement() == placement
