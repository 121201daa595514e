"""The service token leaves ``serve``'s environment and command line at start.

The kernel keeps a process's first environment and argv in ``/proc/PID/environ`` and
``/proc/PID/cmdline`` whatever the program later deletes, and any process of the same
user (a job, on a local Ray) can read them. So when the token came by ``--token`` or
``GPUMOSAIC_TOKEN``, ``serve`` executes itself again (same pid) without it, handing the
token over on an inherited pipe (``--token-fd N``, read once and closed). ``--token-file``
never puts it there in the first place.
"""

from __future__ import annotations

import os
import stat
import sys

from gpumosaic.errors import InputError

ENV = "GPUMOSAIC_TOKEN"


def token_from(token: str, token_file: str | None, token_fd: int | None) -> str:
    """The token: from the pipe of a re-executed ``serve``, a file, or as given."""
    if token_fd is not None:
        chunks = []
        while chunk := os.read(token_fd, 4096):
            chunks.append(chunk)
        os.close(token_fd)
        return b"".join(chunks).decode()
    if token_file:
        try:
            with open(token_file) as f:
                mode = os.fstat(f.fileno()).st_mode
                if mode & 0o077:  # a job (--job-user) or another user could read it
                    raise InputError(
                        f"is readable or writable by group or others (mode "
                        f"{stat.S_IMODE(mode):o}): chmod 600 it",
                        field="--token-file",
                        value=token_file,
                    )
                text = f.read().strip()
        except OSError as err:
            raise InputError(
                f"cannot read it: {err.strerror or err}", field="--token-file", value=token_file
            ) from None
        if not text:
            raise InputError("is empty", field="--token-file", value=token_file)
        return text
    return token


def _without_token(argv: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--token":
            skip = True
        elif not arg.startswith("--token="):
            out.append(arg)
    return out


def reexec_without_token(token: str) -> None:
    """Execute this ``serve`` again without the token in its environment or argv (the
    token on a pipe); returns only when neither holds it (then nothing is left to hide)."""
    argv = list(sys.orig_argv)
    in_argv = any(a == "--token" or a.startswith("--token=") for a in argv)
    in_env = bool(os.environ.get(ENV))
    # Only a process that is ``serve`` (not a test calling the command in-process).
    if not token or not (in_argv or in_env) or "serve" not in argv:
        return
    read_end, write_end = os.pipe()
    os.write(write_end, token.encode())  # far below a pipe's buffer: never blocks
    os.close(write_end)
    os.set_inheritable(read_end, True)
    env = {k: v for k, v in os.environ.items() if k != ENV}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(
        sys.executable,
        [sys.executable, *_without_token(argv[1:]), "--token-fd", str(read_end)],
        env,
    )
