"""How a lease's command is started: directly when it is a plain command (quoted
arguments and ``--flag=value`` included), under ``/bin/sh -c`` when it needs a shell. A
job started directly gets the stop's SIGTERM itself: its exit, after its final
checkpoint, is what ends the lease (not a shell's exit under it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpumosaic.runtime.executors.ray import argv
from gpumosaic.runtime.executors.warm_ray import NodeLauncher


@pytest.mark.parametrize(
    ("command", "direct"),
    [
        ("python -m x --rates V100=7.1,K80=3", ["python", "-m", "x", "--rates", "V100=7.1,K80=3"]),
        ("python x -t 'ResNet-18 (batch 64)'", ["python", "x", "-t", "ResNet-18 (batch 64)"]),
        ('python "a b" c', ["python", "a b", "c"]),
        ("python -c 'import time; time.sleep(1)'", ["python", "-c", "import time; time.sleep(1)"]),
        ("FOO=1 python t.py", None),  # an assignment: the shell's
        ("a | b", None),
        ("a && b", None),
        ('python "$HOME/x"', None),  # an expansion inside double quotes
        ("echo $X", None),
        ("ls *.py", None),
        ("python 'unterminated", None),
        ("a # comment", None),
    ],
)  # fmt: skip
def test_plain_commands_run_directly_and_shell_ones_under_sh(command, direct) -> None:
    assert argv(command) == (direct if direct is not None else ["/bin/sh", "-c", command])


@pytest.mark.slow
def test_a_stopped_job_with_flag_values_and_quoted_arguments_exits_on_its_own(
    tmp_path: Path,
) -> None:
    # The job catches SIGTERM, saves and exits 0; a shell under it would have been killed
    # by the SIGTERM at once (-15) while the job went on.
    saved = tmp_path / "saved"
    script = tmp_path / "job.py"
    script.write_text(
        "import signal, sys, time\n"
        "stop = []\n"
        "signal.signal(signal.SIGTERM, lambda *_: stop.append(1))\n"
        "print('ready', flush=True)\n"
        "while not stop:\n"
        "    time.sleep(0.01)\n"
        "time.sleep(0.3)  # the final checkpoint\n"
        "open(sys.argv[1].split('=', 1)[1], 'w').write(sys.argv[2])\n"
    )
    log = tmp_path / "job.log"
    command = f"{sys.executable} {script} --out={saved} 'a b (c)'"
    launcher = NodeLauncher()
    assert launcher.start("L/0", command, "", {"GPUMOSAIC_LEASE_ID": "L"}, str(log)) is not None
    for _ in range(500):
        if "ready" in log.read_text():
            break
        launcher.exits(0.01)
    launcher.terminate("L/0", 10.0)
    exits = launcher.exits(10.0)
    assert [(key, code) for key, code, _, _ in exits] == [("L/0", 0)]
    assert saved.read_text() == "a b (c)"  # written before the exit was reported
