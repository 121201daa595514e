"""Benchmark: build the report page of a result folder (not part of the tests).

    .venv/bin/python bench/bench_report.py DIR [--repeat 3]

DIR is a study's result folder, e.g. the 70-run FGD preset:
    gpumosaic run --preset fgd-openb --out runs/fgd-openb   (about 5 minutes on 2 cores)
    .venv/bin/python bench/bench_report.py runs/fgd-openb
Target (issue 14): under 10 s and under 10 MB for that folder. Prints wall and CPU seconds
of each build (CPU time is the stable number on a shared machine) and the page's size.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from gpumosaic.experiments.report.page import build_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for i in range(args.repeat):
        cpu = time.process_time()
        outcome = build_report(args.folder)
        print(
            f"build {i + 1}: {outcome.elapsed_s:.2f} s wall, {time.process_time() - cpu:.2f} s "
            f"CPU, {outcome.runs} runs, {outcome.figures} figures, "
            f"{outcome.bytes / 1e6:.2f} MB"
        )


if __name__ == "__main__":
    main()
