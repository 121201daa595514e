"""Pictures carry what tables carry (issue 36), read from the matplotlib Figure objects:
titles name cluster, workload, background and seeds; series that finished different job
sets carry their counts and a note; the sim-vs-live figure says what it compares."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from gpumosaic.cli.compare.table import comparison_title
from gpumosaic.experiments.plots.runs import comparison_figure
from gpumosaic.experiments.sim_vs_live.agreement import agreement_figure


def texts(fig: Any) -> dict[str, list[str]]:
    """Every text a reader sees: the title, the footnote, each panel's title, tick labels
    and legend entries."""
    axes = fig.get_axes()
    return {
        "suptitle": [fig._suptitle.get_text() if fig._suptitle else ""],
        "footnote": [fig._supxlabel.get_text() if fig._supxlabel else ""],
        "titles": [ax.get_title() for ax in axes],
        "ticks": [t.get_text() for ax in axes for t in ax.get_xticklabels()],
        "legend": [
            t.get_text() for ax in axes if ax.get_legend() for t in ax.get_legend().get_texts()
        ],
    }


def _jcts(n: int, scale: float) -> np.ndarray:
    return np.linspace(1.0, 2.0, n) * scale * 3600


def test_a_comparison_of_different_job_sets_says_so_with_the_counts() -> None:
    title = comparison_title(
        "fifo", "openb:gpu", "examples/operator_jobs.csv", ["none"], "openb:default,fraction=0.9"
    )
    fig = comparison_figure(
        {"bestfit": [_jcts(400, 2.0), _jcts(400, 2.1)], "fgd": [_jcts(384, 1.9), _jcts(384, 2.0)]},
        {"bestfit": [7200.0, 7500.0], "fgd": [6900.0, 7200.0]},
        title,
        seeds=[0, 1],
        completed={"bestfit": [400, 400], "fgd": [384, 384]},
        jobs={"bestfit": [400, 400], "fgd": [400, 400]},
    )
    seen = texts(fig)
    suptitle = seen["suptitle"][0]
    for part in ("openb:gpu", "examples/operator_jobs.csv", "background openb:default,fraction=0.9",
                 "seeds 0-1"):  # fmt: skip
        assert part in suptitle, suptitle
    assert "bestfit (400 of 400 jobs done)" in seen["ticks"], seen["ticks"]
    assert "fgd (384 of 400 jobs done)" in seen["ticks"], seen["ticks"]
    assert "fgd (384 of 400 jobs done)" in seen["legend"], seen["legend"]
    assert "different job sets" in seen["footnote"][0] and "fgd 384" in seen["footnote"][0]
    assert all(seen["titles"]), seen["titles"]  # every panel says what it shows


def test_the_same_job_sets_carry_no_counts() -> None:
    fig = comparison_figure(
        {"bestfit": [_jcts(50, 2.0)], "fgd": [_jcts(50, 1.9)]},
        {"bestfit": [7200.0], "fgd": [6900.0]},
        comparison_title("fifo", "v100:4", "gavel:jobs=50", ["none"], None),
        seeds=[0],
        completed={"bestfit": [50], "fgd": [50]},
        jobs={"bestfit": [50], "fgd": [50]},
    )
    seen = texts(fig)
    assert seen["ticks"][:2] == ["bestfit", "fgd"]  # the bar panel's labels
    assert "different job sets" not in seen["footnote"][0]
    assert "background" not in seen["suptitle"][0] and "seed 0" in seen["suptitle"][0]


def test_the_sim_vs_live_figure_names_what_it_compares() -> None:
    jobs = [SimpleNamespace(job_id=i, sim_jct_s=100.0 * i, live_jct_s=105.0 * i) for i in (1, 2)]
    comparison = SimpleNamespace(jobs=jobs, time_scale=60.0)
    scenario = "rounds, max_min_fairness + fgd on v100:2, gavel:jobs=4,rate=2, seed 3"
    seen = texts(agreement_figure(comparison, scenario))
    assert scenario in seen["suptitle"][0] and "time scale 60" in seen["suptitle"][0]
    assert all(seen["titles"]) and len(seen["titles"]) == 2, seen["titles"]
    assert "live = simulated" in seen["legend"]


def test_policies_that_completed_different_job_sets_are_marked_at_those_rates() -> None:
    from gpumosaic.experiments.sweeps.policies import PolicyRatePoint, jct_vs_rate_figure

    def point(policy: str, rate: float, completed: float) -> PolicyRatePoint:
        return PolicyRatePoint(
            policy=policy, rate_per_hour=rate, seeds=2, avg_jct_s_mean=3600.0 * rate,
            avg_jct_s_sd=0.0, ftf_rho_max_mean=1.0, elapsed_s=1.0,
            completed_mean=completed, rejected_mean=0.0, unfinished_mean=40.0 - completed,
            jobs_mean=40.0,
        )  # fmt: skip

    points = [
        *(point("max_min_fairness", r, c) for r, c in ((2.0, 40), (4.0, 38))),
        *(point("finish_time_fairness", r, c) for r, c in ((2.0, 40), (4.0, 36))),
    ]
    fig = jct_vs_rate_figure(points, "gavel:jobs=40 on v100:8,k80:8, strided", seeds=[0, 1])
    seen = texts(fig)
    assert (
        "gavel:jobs=40 on v100:8,k80:8" in seen["suptitle"][0]
        and "seeds 0-1" in seen["suptitle"][0]
    )
    marks = sorted(t.get_text() for ax in fig.get_axes() for t in ax.texts)
    assert marks == ["36 of 40 done", "38 of 40 done"], marks  # only at 4 jobs/h, where they differ
    assert "different job sets at 4 jobs/hour" in seen["footnote"][0]
    same = jct_vs_rate_figure([p for p in points if p.rate_per_hour == 2.0], "x")
    assert not [t for ax in same.get_axes() for t in ax.texts]
    assert "different job sets" not in texts(same)["footnote"][0]
