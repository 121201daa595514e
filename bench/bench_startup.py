"""Start-up of the command line: `gpumosaic --help` and a few mistakes' one-line errors,
each in a fresh interpreter, median of N, as wall time and as CPU time (user + system of
the child: what the command costs, nearly independent of other load on the machine).
Issue 28's target: under 0.2 s for --help and a mistake's line.

Each mistake inside a spec string (--cluster, --placement, --sharing, --workload, a job
list's row, a study file's grid) is measured in every command that takes one; the exit
status is printed so that a line shows the refusal it measured (2).

Run: .venv/bin/python bench/bench_startup.py [N] [--src OTHER/src]   (--src: an older
checkout's sources, to compare)."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = (
    ("--help",),
    ("simulate", "--help"),
    # Refused by the description's own checks (names and light parsers: no numpy).
    ("simulate", "--seed", "-1"),
    ("simulate", "--round-s", "nan"),
    ("simulate", "--policy", "nosuch"),
    ("simulate", "--mechanism", "rounds", "--policy", "sjf"),
    ("compare", "--seeds", "-1"),
    ("fill", "--seed", "-1"),
    ("run", "missing.toml"),
    ("nosuchcommand",),
    # A mistake inside a spec string: refused by that spec's grammar, the parser the build
    # uses, before numpy loads (issue 28). One of each kind, then each command that takes
    # specs. {tmp}: a scratch folder with the files below.
    ("simulate", "--cluster", "v100:x"),
    ("simulate", "--cluster", "h100:4"),
    ("simulate", "--placement", "fgdd"),
    ("simulate", "--sharing", "nvshare:tq=-1"),
    ("simulate", "--sharing", "gandiva:packing=maybe"),
    ("simulate", "--workload", "gavel:jobs=abc"),
    ("simulate", "--workload", "gavel-stream:rate=3"),
    ("simulate", "--workload", "{tmp}/missing.csv"),
    ("simulate", "--workload", "{tmp}/bad_row.csv"),
    ("compare", "--out", "{tmp}/c", "--cluster", "v100:x"),
    ("compare", "--out", "{tmp}/c", "--placements", "fgdd"),
    ("compare", "--out", "{tmp}/c", "--policies", "nosuch", "--rates", "1"),
    ("compare", "--out", "{tmp}/c", "--mode", "fill", "--placements", "fgdd"),
    ("sim-vs-live", "--cluster", "v100:x", "--workload", "gavel:jobs=3", "--policy", "fifo"),
    ("serve", "--placement", "fgdd"),
    ("serve", "--sharing", "nvshare:tq=-1"),
    ("extender", "--placement", "fgdd"),
    ("fill", "--placement", "fgdd"),
    ("run", "{tmp}/bad_cluster.toml", "--out", "{tmp}/r"),
)
# The files the spec mistakes above name.
FILES = {
    "bad_row.csv": "arrival_s,num_gpu,duration_s\n0,1,60\n0,1e12,60\n",
    "bad_cluster.toml": '[experiment]\nname = "x"\n\n[grid]\ncluster = "v100:x"\n'
    'workload = "gavel:jobs=5"\n',
}


def measure(argv: tuple[str, ...], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall, CPU) seconds and the exit status of one command in a fresh interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gpumosaic", *argv],
        capture_output=True,
        check=False,
        timeout=120,
        env=env,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


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
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in FILES.items():
            Path(tmp, name).write_text(text)
        for command in COMMANDS:
            argv = tuple(a.replace("{tmp}", tmp) for a in command)
            runs = [measure(argv, env) for _ in range(repeats)]
            wall = statistics.median(w for w, _, _ in runs)
            cpu = statistics.median(c for _, c, _ in runs)
            codes = sorted({code for _, _, code in runs})
            shown = " ".join(command).replace("{tmp}/", "")
            print(
                f"gpumosaic {shown:62s} wall {wall:.3f} s  CPU {cpu:.3f} s  "
                f"exit {','.join(map(str, codes))}  (n={repeats})"
            )


if __name__ == "__main__":
    main()
