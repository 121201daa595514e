"""CLI conveniences of the round service's clients (issue 27, item 3): ``jobs --state``/
``--name`` and the "no jobs" line, human times and ``--utc``, live ``attained``,
``cancel`` of several ids, ``--json`` on each command, ``submit --wait``,
``logs --follow`` (and Ctrl-C), shell completion, and ``/docs`` with no CDN.

The service runs in this process with the in-process executor (virtual jobs stepping at
50 steps/s); the commands that wait run as subprocesses, so that they can be interrupted
and their exit codes are the real ones."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest
from rounds_support import wait_for
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.runtime.api.client import ServiceClient

runner = CliRunner()
SRC = str(Path(__file__).resolve().parents[3] / "src")
TOKEN = "s3cret-token"


def cli(svc, *args: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    result = runner.invoke(app, [*args, "--server", svc.url])
    return result.exit_code, result.output


def _interactive_signals() -> None:  # pragma: no cover - runs in the child
    # As a terminal starts a command: Ctrl-C's SIGINT at its default, whatever this test
    # run inherited (a run started in the background by a non-interactive shell ignores
    # SIGINT, and an ignored SIGINT is inherited: the Ctrl-C test would wait forever).
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(svc, *args: str) -> subprocess.Popen[str]:  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONPATH": SRC, "GPUMOSAIC_SERVER": svc.url}
    return subprocess.Popen(
        [sys.executable, "-m", "gpumosaic", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_interactive_signals,
    )


def readline(proc: subprocess.Popen[str], timeout_s: float = 60.0) -> str:
    """The process's next line of stdout, or a failure after ``timeout_s`` (bounded)."""
    assert proc.stdout is not None
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout_s)
    assert box, f"no line from {proc.args} in {timeout_s:g} s"
    return box[0]


def test_jobs_filters_times_and_the_no_jobs_line(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=600.0)
    assert cli(svc, "jobs") == (0, "no jobs\n")
    client = ServiceClient(svc.url)
    # One batch: all three are admitted at one round boundary (one by one, a later one
    # could miss the first round and wait the whole 600 s round).
    client.submit_batch(
        [{"command": "train", "steps": 1e9, "name": n} for n in ("alpha", "beta", "alpha")]
    )
    code, out = cli(svc, "jobs", "--name", "alpha", "--json")
    assert code == 0 and [r["id"] for r in json.loads(out)] == [1, 3]
    code, out = cli(svc, "jobs", "--name", "  beta ", "--json")  # stored stripped, as admitted
    assert code == 0 and [r["id"] for r in json.loads(out)] == [2]
    assert cli(svc, "jobs", "--name", "gamma") == (0, "no jobs (name 'gamma')\n")
    code, out = cli(svc, "jobs", "--state", "done")
    assert code == 0 and out == "no jobs (state done)\n"
    code, out = cli(svc, "jobs", "--state", "finished")
    assert code == 2 and len(out.strip().splitlines()) == 1 and "--state" in out
    code, out = cli(svc, "jobs", "--name", "x" * 129)
    assert code == 2 and "--name" in out
    # The service applies the same rules to a client that is not the CLI.
    for bad in ("x" * 129, "a\0b"):
        query = urllib.parse.urlencode({"name": bad})
        with pytest.raises(Exception, match=r"name|128"):
            client.request("GET", f"/v1/jobs?{query}")
    wait_for(lambda: len(client.jobs("running")) == 3, 120, "three running jobs")
    code, out = cli(svc, "jobs", "--state", "running", "--name", "alpha", "--json")
    assert [r["id"] for r in json.loads(out)] == [1, 3]
    code, out = cli(svc, "jobs")
    assert code == 0 and re.search(r"just now|\d+ s ago", out), out
    code, out = cli(svc, "job", "1", "--utc")
    assert re.search(r"submitted_at: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(", out), out
    code, out = cli(svc, "job", "1")
    assert re.search(r"submitted_at: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d \(", out), out


def test_attained_grows_while_a_job_runs(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=600.0)  # one long round: nothing is credited at a round end
    client = ServiceClient(svc.url)
    client.submit({"command": "train", "steps": 1e9, "gpu_milli": 500})
    wait_for(lambda: client.job(1)["steps_done"] > 0, 120, "the job to step")
    t0 = time.time()
    first = client.job(1)["attained_s"]
    t1 = time.time()
    time.sleep(1.0)
    t2 = time.time()
    second = client.job(1)["attained_s"]
    t3 = time.time()
    assert 0 < first < second  # not 0.0 s until the round ends
    # Half a GPU: GPU seconds grow at half the wall clock's rate, between the two answers.
    assert 0.5 * (t2 - t1) <= second - first <= 0.5 * (t3 - t0)
    _, out = cli(svc, "jobs", "--json")
    assert json.loads(out)[0]["attained_s"] >= second


def test_cancel_several_ids(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=600.0)
    client = ServiceClient(svc.url)
    for _ in range(3):
        client.submit({"command": "train", "steps": 1e9})
    code, out = cli(svc, "cancel", "1", "0")  # a bad id: refused before any job is touched
    assert code == 2 and "JOB_ID" in out
    assert all(j.state != "cancelled" and not j.cancel_requested for j in svc.store.jobs())
    result = runner.invoke(app, ["cancel", "1", "2", "99", "--server", svc.url])
    assert result.exit_code == 2
    assert "job 1: cancelling" in result.stdout and "job 2: cancelling" in result.stdout
    assert "job 99" in result.output and "no job 99" in result.output
    wait_for(lambda: client.job(2)["state"] == "cancelled", 120, "job 2 cancelled")
    code, out = cli(svc, "cancel", "3", "2", "--json")
    assert code == 2
    answers = json.loads(out)
    assert answers[0] == {"id": 3, "state": "cancelling"}
    assert answers[1]["id"] == 2 and "already cancelled" in answers[1]["error"]


def test_logs_json_and_from_an_offset(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=600.0)
    client = ServiceClient(svc.url)
    client.submit({"command": "train", "steps": 1e9})
    log = Path(svc.log_path(1))
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes("first line\nsnow: ☃\n".encode())
    code, out = cli(svc, "logs", "1", "--json")
    answer = json.loads(out)
    assert code == 0 and answer == {"id": 1, "log": "first line\nsnow: ☃\n", "end": 21}
    assert client.log_bytes(1, 11) == ("snow: ☃\n".encode(), 21)
    assert client.log_bytes(1, 1000) == (b"", 21)  # past the end: nothing, and where it is
    assert client.log_tail(1, 4) == ("☃\n".encode(), 21)


def test_logs_follow_until_the_job_ends_and_ctrl_c(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=600.0)
    client = ServiceClient(svc.url)
    client.submit({"command": "train", "steps": 1e9})
    client.submit({"command": "train", "steps": 1e9})
    log = Path(svc.log_path(1))
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("old\n")
    follow = spawn(svc, "logs", "1", "--follow")
    interrupted = spawn(svc, "logs", "2", "-f", "--json")
    try:
        assert readline(follow) == "old\n"
        for i in range(3):  # written while it follows
            with log.open("a") as f:
                f.write(f"new {i}\n")
            assert readline(follow) == f"new {i}\n"
        with log.open("a") as f:
            f.write("last words\n")
        client.cancel(1)
        out, err = follow.communicate(timeout=60)
        assert follow.returncode == 0 and out == "last words\n", (out, err)

        line = json.loads(readline(interrupted))  # it runs: past its imports
        assert line == {"id": 2, "log": "", "end": 0}
        interrupted.send_signal(signal.SIGINT)
        out, err = interrupted.communicate(timeout=60)
        assert interrupted.returncode == 130 and err == "", err  # quietly
    finally:
        for proc in (follow, interrupted):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_submit_wait_exit_code_follows_the_end_state(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=1.0)
    done = spawn(svc, "submit", "--command", "train", "--steps", "20", "--wait", "--json")
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert json.loads(out) == {"id": 1, "state": "done"}
    assert "job 1: done" in err  # the progress line's last state

    waiting = spawn(svc, "submit", "--command", "train", "--steps", "1e9", "--wait")
    try:
        assert readline(waiting) == "2\n"  # the id first, then the wait
        wait_for(lambda: ServiceClient(svc.url).job(2)["state"] == "running", 120, "running")
        ServiceClient(svc.url).cancel(2)
        out, err = waiting.communicate(timeout=120)
        assert waiting.returncode == 3, err  # cancelled
        lines = err.strip().splitlines()  # not a terminal: one line per change of state
        assert lines[-1].startswith("job 2: cancelled") and len(lines) <= 4, lines
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()


def test_shell_completion_is_on() -> None:
    env = {"_GPUMOSAIC_COMPLETE": "complete_bash", "COMP_WORDS": "gpumosaic jo", "COMP_CWORD": "1"}
    result = runner.invoke(app, [], env=env, prog_name="gpumosaic")
    assert result.exit_code == 0 and result.output.split() == ["jobs", "job"]
    env = {**env, "COMP_WORDS": "gpumosaic logs 1 --fo", "COMP_CWORD": "3"}
    result = runner.invoke(app, [], env=env, prog_name="gpumosaic")
    assert result.output.split() == ["--follow"]
    result = runner.invoke(app, ["--help"])
    assert "--install-completion" in result.output and "--show-completion" in result.output


def test_docs_work_offline_and_need_the_token(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(token=TOKEN)
    client = ServiceClient(svc.url, TOKEN)
    page = client.request("GET", "/docs")
    assert client.request("GET", "/redoc") == page  # the same offline page (ReDoc's: a CDN)
    # Nothing is loaded from another host: every src/href is a path of this service.
    urls = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert urls and all(u.startswith("/docs/assets/") for u in urls), urls
    assert "cdn" not in page.lower() and '"/v1/jobs"' in page  # the schema is inlined
    assert '"scheme": "bearer"' in page and TOKEN not in page  # "Authorize" asks for it
    for url in urls:
        body = client.request("GET", url)
        assert len(body) > 100_000, url  # Swagger UI's real bundle and style sheet
    anonymous = ServiceClient(svc.url)
    for path in ("/docs", *urls):
        with pytest.raises(Exception, match="401"):
            anonymous.request("GET", path)
    with pytest.raises(Exception, match="404"):
        client.request("GET", "/docs/assets/..%2Fswagger-ui.css.map")


@pytest.mark.slow
def test_real_jobs_on_ray_wait_and_follow(service_factory) -> None:  # type: ignore[no-untyped-def]
    """On the session's Ray: ``submit --wait`` of a real job ends 0 when it is done and 1
    when it fails; ``logs --follow`` prints the job's own output and ends with it."""
    from rounds_support import TRAIN

    svc = service_factory(cluster="v100:1")
    ok = spawn(
        svc,
        *("submit", "--command", TRAIN, "--steps", "40", "--env", "STEP_S=0.05"),
        "--wait",
    )
    follow: subprocess.Popen[str] | None = None
    try:
        job_id = int(readline(ok, 120))
        follow = spawn(svc, "logs", str(job_id), "--follow")
        out, err = follow.communicate(timeout=180)
        assert follow.returncode == 0, err
        assert "start pid=" in out and "stop at step 40" in out, out
        _, err = ok.communicate(timeout=60)
        assert ok.returncode == 0, err
    finally:
        for proc in (ok, follow):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    bad = spawn(
        svc,
        *("submit", "--command", TRAIN, "--steps", "10", "--env", "FAIL_EXIT=3"),
        *("--max-retries", "0", "--wait", "--json"),
    )
    out, err = bad.communicate(timeout=180)
    assert bad.returncode == 1, err
    assert json.loads(out)["state"] == "failed"


@pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="Debian's chromium is not installed (apt-get install -y chromium, or make browser)",
)
def test_docs_render_in_headless_chromium_with_no_network(api_factory) -> None:  # type: ignore[no-untyped-def]
    """Swagger UI draws every route from the files the service serves (this machine has
    no network: a CDN could not be reached) and reads FastAPI's OpenAPI 3.1."""
    svc = api_factory()
    done = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", "--virtual-time-budget=10000", "--dump-dom", svc.url + "/docs"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert [line for line in done.stderr.splitlines() if ":CONSOLE" in line] == []
    assert "Unable to render" not in done.stdout
    for path in ("/v1/jobs", "/v1/jobs/{job_id}/logs", "/v1/jobs/{job_id}/cancel"):
        assert f'data-path="{path}"' in done.stdout, path
