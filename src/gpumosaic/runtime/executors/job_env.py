"""What a job's process starts with: a clean environment and, with ``--job-user``,
another OS user (docs/live.md, "Authentication and threat model").

A job never inherits the environment of the process that starts it (a Ray worker, whose
environment is the service's on a local Ray): it gets the few variables a program needs
to run (``PATH``, locale, home, CUDA's and the dynamic loader's paths) and the lease's
own (its lease id, URL, its *own* token, ``CUDA_VISIBLE_DEVICES``, ...). With a job user,
the process runs as that user (its groups, its home), so it cannot read the service's
memory, environment, state file or other users' files.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from typing import Any

RUN_AS = "GPUMOSAIC_JOB_USER"  # carried in the lease's env to the process starter only
KEPT = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR",
        "TERM", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    }
)  # fmt: skip
KEPT_PREFIXES = ("LC_", "CUDA_", "NVIDIA_")


def job_environment(
    base: Mapping[str, str], lease: Mapping[str, str]
) -> tuple[dict[str, str], str]:
    """The environment of a job's process from the starter's ``base`` (only the
    variables above survive) and the ``lease``'s, and the user to run it as ('' for the
    starter's own)."""
    env = {k: v for k, v in base.items() if k in KEPT or k.startswith(KEPT_PREFIXES)}
    env.update(lease)
    user = env.pop(RUN_AS, "")
    if user:
        entry = pwd.getpwnam(user)
        env.update({"HOME": entry.pw_dir, "USER": user, "LOGNAME": user})
    return env, user


def run_as(user: str) -> dict[str, Any]:
    """``subprocess.Popen`` arguments that start the process as ``user`` (its primary
    group, no supplementary group of the starter); {} for the starter's own user."""
    if not user:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def give_to(path: str, user: str) -> None:
    """Make ``path`` (a directory the starter made for the job) the job user's."""
    if user and path:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)
