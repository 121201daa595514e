"""Start-up of the command line: `gpumosaic --help` and a few mistakes' one-line errors,
each in a fresh interpreter, median of N, as wall time and as CPU time (user + system of
the child: what the command costs, nearly independent of other load on the machine).
Issue 28's target: under 0.2 s for --help and a mistake's line.

Run: .venv/bin/python bench/bench_startup.py [N] [--src OTHER/src]   (--src: an older
checkout's sources, to compare)."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = (
    ("--help",),
    ("simulate", "--help"),
    # Refused by the description's own checks (names and light parsers: no numpy).
    ("simulate", "--seed", "-1"),
    ("simulate", "--round-s", "nan"),
    ("simulate", "--policy", "nosuch"),
    ("simulate", "--mechanism", "rounds", "--policy", "sjf"),
    # Refused while the run's parts are built (numpy, the placement registry; no simulator).
    ("simulate", "--cluster", "v100:x"),
    ("simulate", "--placement", "nosuch"),
    ("compare", "--seeds", "-1"),
    ("fill", "--seed", "-1"),
    ("run", "missing.toml"),
    ("compare", "--policies", "nosuch"),
    ("nosuchcommand",),
)


def measure(argv: tuple[str, ...], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one command in a fresh interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "gpumosaic", *argv],
        capture_output=True,
        check=False,
        timeout=120,
        env=env,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    args = sys.argv[1:]
    env = dict(os.environ)
    if "--src" in args:
        at = args.index("--src")
        env["PYTHONPATH"] = args[at + 1]
        del args[at : at + 2]
    repeats = int(args[0]) if args else 7
    measure(("--help",), env)  # warm the file cache and the bytecode
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for argv in COMMANDS:
        runs = [measure(argv, env) for _ in range(repeats)]
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"gpumosaic {' '.join(argv):46s} wall {wall:.3f} s  CPU {cpu:.3f} s  (n={repeats})")


if __name__ == "__main__":
    main()
