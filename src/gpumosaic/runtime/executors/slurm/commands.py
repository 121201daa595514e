"""Slurm's commands as gpumosaic calls them: ``sinfo``, ``squeue``, ``sbatch``, ``scancel``
and ``scontrol``, found on ``PATH`` (or ``/usr/bin``, ``/usr/sbin``), run with the
service's ``SLURM_CONF`` (the standard variable: unset, Slurm's own default), each bounded
in time; a failure is one ``SlurmError`` line with the command's own message."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

COMMAND_TIMEOUT_S = 30.0  # a bound on one command, far above the ~10 ms it takes
_FOLDERS = ("/usr/bin", "/usr/sbin", "/usr/local/bin")


class SlurmError(RuntimeError):
    """A Slurm command failed or could not run."""


def find(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for folder in _FOLDERS:
        path = Path(folder) / name
        if path.exists():
            return str(path)
    raise SlurmError(f"{name} not found: install Slurm's client commands (slurm-client)")


@dataclass(frozen=True, slots=True)
class SlurmCommands:
    """Runs Slurm commands; ``conf`` is the ``SLURM_CONF`` they read (None: inherited)."""

    conf: str | None = None

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(extra) if extra is not None else dict(os.environ)
        if self.conf:
            env["SLURM_CONF"] = self.conf
        elif "SLURM_CONF" in os.environ:
            env.setdefault("SLURM_CONF", os.environ["SLURM_CONF"])
        return env

    def run(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, check: bool = True
    ) -> str:
        try:
            done = subprocess.run(
                [find(argv[0]), *argv[1:]],
                env=self.env(env),
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            raise SlurmError(f"{argv[0]}: {err}") from None
        if check and done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()
            raise SlurmError(f"{' '.join(argv[:2])}: {why[-1] if why else done.returncode}")
        return done.stdout
