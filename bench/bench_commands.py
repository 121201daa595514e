"""Whole-process timings of the issue-13 targets: median of N runs, with peak memory.

Each command runs as a fresh process under ``/usr/bin/time -v`` (start-up, imports and
data loading included, as a user sees it); the table gives the median wall time and the
largest peak resident memory over the runs (of the parent process; a process pool's
workers are children, and ``time -v`` reports the largest of parent and waited-for
children).

    /work/venv/bin/python bench/bench_commands.py [--repeat 3] [--only fill,help]
        [--src SRC]   # the source tree to time (default: this checkout's src/)

``--src`` makes a before/after comparison in one sitting: export the older commit with
``git archive`` and point ``--src`` at its ``src``. The first line says whether the tree's
ahead-of-time kernel library is built (``make`` builds it; ``python -m
gpumosaic kernels`` with that ``src`` on the path); without it the kernels start numba.
Python writes no bytecode when ``PYTHONDONTWRITEBYTECODE`` is set, and every run then
compiles the package's sources again (~0.1-0.3 s): unset it, as an install's are compiled.

``tree_cpu_s`` is the CPU of the whole process tree, pool workers included: this process
makes itself the "child subreaper" (Linux ``prctl``), so the orphaned fork server and its
workers are reparented to it, reaped here, and counted in ``RUSAGE_CHILDREN``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The ``gpumosaic`` console script, without needing the package installed.
CLI = [sys.executable, "-c", "import sys; from gpumosaic.cli import main; sys.exit(main())"]

FILL_SWEEP_PLACEMENTS = "random,dotprod,gpuclustering,gpupacking,bestfit,fgd,pwr"
COMMANDS: dict[str, list[str]] = {
    "help": ["--help"],
    "fill": [
        "fill",
        "--tasks",
        "openb:default",
        "--nodes",
        "openb:gpu",
        "--placement",
        "fgd",
        "--seed",
        "42",
        "--inflate",
        "1.3",
        "--json",
    ],
    "fill_sweep": [
        "compare",
        "--mode",
        "fill",
        "--placements",
        FILL_SWEEP_PLACEMENTS,
        "--seeds",
        "42-51",
        "--workers",
        "2",
        "--json",
        "--out",
        "{tmp}",
    ],
    "replay": [
        "simulate",
        "--cluster",
        "openb:gpu",
        "--workload",
        "openb:default,inflate=12",
        "--json",
    ],
}


PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Adopt orphaned descendants (a process pool's fork server and workers) so their CPU
    is counted; False where the kernel call is unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children_cpu_s() -> float:
    """CPU seconds of every reaped descendant so far, after reaping adopted orphans."""
    while True:
        try:
            os.wait()  # adopted descendants exit once the command has ended
        except ChildProcessError:
            break
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str], src: Path) -> tuple[float, float, int, int, float | None, float]:
    """(wall s, CPU s (user + system, waited-for children included), peak RSS KiB, exit
    status, CPU s of the runs as the command reports them in its JSON, if it does, CPU s
    of the whole process tree) of one whole process. A process pool's workers are not
    waited-for children of the command: the tree's CPU counts them (``become_subreaper``)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    before = children_cpu_s()
    with tempfile.TemporaryDirectory() as tmp:
        args = [a.replace("{tmp}", tmp) for a in argv]
        proc = subprocess.run(
            ["/usr/bin/time", "-v", *CLI, *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    wall = _field(proc.stderr, r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)")
    rss = _field(proc.stderr, r"Maximum resident set size \(kbytes\): (\d+)")
    user = float(_field(proc.stderr, r"User time \(seconds\): (\S+)"))
    system = float(_field(proc.stderr, r"System time \(seconds\): (\S+)"))
    runs_cpu = None
    try:
        reported = json.loads(proc.stdout.strip().splitlines()[-1])
        if isinstance(reported, dict) and "run_cpu_s" in reported:
            runs_cpu = float(sum(reported["run_cpu_s"]))
    except (ValueError, IndexError):
        pass
    tree = children_cpu_s() - before
    return _seconds(wall), user + system, int(rss), proc.returncode, runs_cpu, tree


def aot_library_present(src: Path) -> bool | None:
    """Whether ``src``'s ahead-of-time kernel library is built for its current kernels (None:
    ``src`` predates the library). Build it with ``gpumosaic kernels``."""
    code = (
        "try:\n    from gpumosaic.kernel_aot import aot_library\n"
        "except ImportError:\n    print(None)\nelse:\n    print(bool(aot_library()))"
    )
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    return None if out == "None" else out == "True"


def _field(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    if match is None:
        raise RuntimeError(f"no {pattern!r} in /usr/bin/time output:\n{text[-2000:]}")
    return match.group(1)


def _seconds(text: str) -> float:
    parts = [float(p) for p in text.split(":")]
    total = 0.0
    for p in parts:
        total = total * 60 + p
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default=",".join(COMMANDS))
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    args = parser.parse_args()
    subreaper = become_subreaper()
    print(json.dumps({"aot_library": aot_library_present(args.src.resolve())}), flush=True)
    rows = []
    for name in args.only.split(","):
        walls, cpus, peaks, run_cpus, trees = [], [], [], [], []
        for _ in range(args.repeat):
            wall, cpu, rss, status, runs_cpu, tree = run_once(COMMANDS[name], args.src.resolve())
            if status != 0:
                raise SystemExit(f"{name}: exit status {status}")
            walls.append(wall)
            cpus.append(round(cpu, 2))
            trees.append(round(tree, 2))
            peaks.append(rss)
            if runs_cpu is not None:
                run_cpus.append(round(runs_cpu, 2))
        row = {
            "command": name,
            "median_s": round(statistics.median(walls), 2),
            "median_cpu_s": round(statistics.median(cpus), 2),
            "runs_s": walls,
            "runs_cpu_s": cpus,
            # with pool workers (only where this process could adopt them)
            "tree_cpu_s": trees if subreaper else None,
            "median_tree_cpu_s": round(statistics.median(trees), 2) if subreaper else None,
            "peak_mib": round(max(peaks) / 1024, 1),
            "load_avg_1min": round(os.getloadavg()[0], 2),
        }
        if run_cpus:
            row["runs_own_cpu_s"] = run_cpus
        rows.append(row)
        print(json.dumps(row), flush=True)
    load = os.getloadavg()
    print(json.dumps({"load_avg_1_5_15": [round(x, 2) for x in load]}))


if __name__ == "__main__":
    main()
