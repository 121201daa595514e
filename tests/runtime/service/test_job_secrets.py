"""Jobs cannot read the service's secrets (issue 35, class 4): ``serve`` holds its token
in neither its environment nor its command line once started (the kernel keeps the first
ones: it executes itself again without them); a job starts from a clean environment,
never the starter's; ``--job-user`` runs it as another OS user."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpumosaic.runtime.executors.job_env import RUN_AS, job_environment
from gpumosaic.runtime.executors.ray import LeaseProcess

SRC = str(Path(__file__).parents[3] / "src")
SECRET = "s3cret-of-the-service"


def test_a_job_environment_keeps_only_what_a_program_needs() -> None:
    base = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "GPUMOSAIC_TOKEN": SECRET,
            "AWS_SECRET_ACCESS_KEY": "x", "RAY_ADDRESS": "10.0.0.1:6", "LC_ALL": "C"}  # fmt: skip
    lease = {"GPUMOSAIC_TOKEN": "job7.abc", "GPUMOSAIC_LEASE_ID": "7-1-ab",
             "CUDA_VISIBLE_DEVICES": "0"}  # fmt: skip
    env, user = job_environment(base, lease)
    assert env == {"PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C", **lease}
    assert user == ""


def test_a_job_process_does_not_inherit_the_starters_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUMOSAIC_TOKEN", SECRET)  # what a local Ray worker had
    monkeypatch.setenv("SOME_PASSWORD", SECRET)
    log = tmp_path / "job.log"
    proc = LeaseProcess("env", str(tmp_path), {"GPUMOSAIC_LEASE_ID": "1-0-aa"}, str(log))
    assert proc.wait()[0] == 0
    text = log.read_text()
    assert "GPUMOSAIC_LEASE_ID=1-0-aa" in text and "PATH=" in text
    assert SECRET not in text


@contextlib.contextmanager
def throwaway_user() -> Iterator[str]:
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("--job-user needs root and useradd to make a throwaway user")
    name = f"gmjob{os.getpid() % 100000}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True)  # fmt: skip
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def test_job_user_runs_the_job_as_that_user() -> None:
    with throwaway_user() as name, tempfile.TemporaryDirectory() as where:
        tmp_path = Path(where)  # under /tmp: a path the job user can walk
        tmp_path.chmod(0o755)
        uid = pwd.getpwnam(name).pw_uid
        ckpt = tmp_path / "ckpt"
        env = {RUN_AS: name, "GPUMOSAIC_CHECKPOINT_DIR": str(ckpt)}
        log = tmp_path / "job.log"
        # It can write its checkpoint directory, and not read the service's environment.
        command = f"sh -c 'id -u; touch {ckpt}/x && echo wrote; cat /proc/1/environ || echo denied'"
        proc = LeaseProcess(command, str(tmp_path), env, str(log))
        proc.wait()
        lines = log.read_text().splitlines()
        assert str(uid) in lines and "wrote" in lines and "denied" in lines, lines
        assert RUN_AS not in log.read_text()


def _serve_process(tmp_path: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "gpumosaic.cli", "serve", "--cluster", "v100:1", "--port", "0",
           "--state", str(tmp_path / "state.db"), *args]  # fmt: skip
    full_env = {**os.environ, "PYTHONPATH": SRC, "RAY_AUTH_MODE": "disabled", **env}
    return subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "env"),
    [(["--token", SECRET], {}), ([f"--token={SECRET}"], {}), ([], {"GPUMOSAIC_TOKEN": SECRET})],
    ids=["--token T", "--token=T", "GPUMOSAIC_TOKEN"],
)
def test_serve_holds_its_token_in_neither_environ_nor_cmdline(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    proc = _serve_process(tmp_path, args, env)
    try:
        give_up = time.monotonic() + 60
        cmdline = b""
        while b"--token-fd" not in cmdline:  # the same pid, executed again
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < give_up, f"no re-exec seen in 60 s: {cmdline!r}"
            with contextlib.suppress(OSError):
                cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
            time.sleep(0.05)
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
        assert SECRET.encode() not in cmdline and SECRET.encode() not in environ
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_a_token_file_others_could_read_is_refused(tmp_path: Path) -> None:
    # With --job-user a job runs as another user: a token file readable by others would
    # hand it the service token. Refused in one line; 0600 is read.
    from gpumosaic.errors import InputError
    from gpumosaic.runtime.token_handoff import token_from

    path = tmp_path / "token"
    path.write_text(SECRET + "\n")
    path.chmod(0o644)
    with pytest.raises(InputError, match="readable or writable by group or others"):
        token_from("", str(path), None)
    path.chmod(0o600)
    assert token_from("", str(path), None) == SECRET
