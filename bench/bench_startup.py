"""Start-up of the command line: wall time of `gpumosaic --help` and of a few mistakes'
one-line errors, each in a fresh interpreter, median of N (issue 28's target: under
0.2 s for --help and a mistake's line). Run: .venv/bin/python bench/bench_startup.py [N]

Prints one line per command: median, min and max wall seconds."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

COMMANDS = (
    ("--help",),
    ("simulate", "--help"),
    ("simulate", "--seed", "-1"),
    ("simulate", "--cluster", "v100:x"),
    ("compare", "--seeds", "-1"),
    ("fill", "--seed", "-1"),
    ("run", "missing.toml"),
    ("nosuchcommand",),
)


def wall(argv: tuple[str, ...]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "gpumosaic", *argv], capture_output=True, check=False, timeout=120
    )
    return time.perf_counter() - start


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    wall(("--help",))  # warm the file cache and the bytecode
    for argv in COMMANDS:
        times = [wall(argv) for _ in range(repeats)]
        print(
            f"gpumosaic {' '.join(argv):32s} median {statistics.median(times):.3f} s  "
            f"(min {min(times):.3f}, max {max(times):.3f}, n={repeats})"
        )


if __name__ == "__main__":
    main()
