"""``gpumosaic submit | jobs | job | logs | cancel``: the round service's jobs, over HTTP."""

from __future__ import annotations

import codecs
import json
import math
import sys
import time
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from gpumosaic.cli.app import app, err_console, user_errors
from gpumosaic.cli.shown import cell, markup_safe, shown
from gpumosaic.cli.tables import show
from gpumosaic.errors import InputError
from gpumosaic.runtime.api.client import DEFAULT_SERVER, ServiceClient

ServerOpt = Annotated[str, typer.Option(envvar="GPUMOSAIC_SERVER", help="URL of gpumosaic serve")]
TokenOpt = Annotated[str, typer.Option(envvar="GPUMOSAIC_TOKEN", help="the service's token")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]


def _check_id(job_id: int) -> None:
    from gpumosaic.runtime.jobs.admission import MAX_ID

    if not 1 <= job_id <= MAX_ID:
        raise InputError(f"a job id is from 1 to {MAX_ID}", field="JOB_ID", value=job_id)


def _held_a_gpu(row: dict[str, Any]) -> bool:
    """A job shows a GPU once it ran on one: running now, or it made progress. A job that
    never started, or failed before its first step, keeps the service's default GPU
    fields, which name no GPU it used."""
    return row.get("state") == "running" or bool(row.get("steps_done"))


def _gpu(row: dict[str, Any]) -> str:
    """``V100:1`` (model and index), or ``-`` for a job that never held a GPU."""
    if not _held_a_gpu(row) or not row["gpu_type"]:
        return "-"
    return f"{row['gpu_type']}:{row['gpu_index']}" if row["gpu_index"] else row["gpu_type"]


def _shown_value(key: str, value: Any, row: dict[str, Any]) -> Any:
    """A field of ``job`` as a person reads it: a whole number without ``.0``, no GPU
    for a job that never held one."""
    if key in ("gpu_type", "gpu_index") and not _held_a_gpu(row):
        return "-"
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _num(v: Any, fmt: str = "{:,.0f}") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


# ---- waiting (submit --wait, logs --follow) ----------------------------------------------

# Polling is bounded: the first poll after MIN_POLL_S, then 1.5x longer while nothing
# changes, at most MAX_POLL_S apart (a job that runs for hours costs one request per 5 s).
MIN_POLL_S = 0.25
MAX_POLL_S = 5.0
INTERRUPTED = 130  # exit code after Ctrl-C, as a shell reports SIGINT
LOG_READ_FULL = 16 * 1024 * 1024  # a read this long may have left more: read again at once
WAIT_EXIT = {"done": 0, "failed": 1, "rejected": 1, "cancelled": 3}


class Poll:
    """The sleep between polls: short after a change, growing while nothing changes."""

    def __init__(self, most_s: float = MAX_POLL_S) -> None:
        self.most_s = most_s
        self.interval_s = MIN_POLL_S

    def sleep(self, changed: bool) -> None:
        self.interval_s = MIN_POLL_S if changed else min(self.interval_s * 1.5, self.most_s)
        time.sleep(self.interval_s)


def _wait_exit_code(states: list[str]) -> int:
    """0 when every job is done, else the worst end: 1 (failed, rejected), 3 (cancelled)."""
    codes = [WAIT_EXIT.get(s, 1) for s in states]
    return 1 if 1 in codes else max(codes, default=0)


def _wait_for(client: ServiceClient, ids: list[int]) -> list[str]:
    """Poll until every job of ``ids`` ends; the end states in ``ids``' order. A progress
    line on stderr (rewritten in place on a terminal, else one line per change of
    states). Ctrl-C: one line (the jobs go on), exit 130."""
    from gpumosaic.runtime.jobs.submission import TERMINAL_STATES

    wanted = set(ids)
    last, poll = "", Poll()
    tty = sys.stderr.isatty()
    try:
        while True:
            rows = _rows_of(client, ids, wanted)
            line = _progress_line(rows, tty)
            if line != last:
                if tty:
                    sys.stderr.write("\r\033[K" + line)
                else:
                    sys.stderr.write(line + "\n")
                sys.stderr.flush()
            changed, last = line != last, line
            if rows and all(r["state"] in TERMINAL_STATES for r in rows):
                if tty:
                    sys.stderr.write("\n")
                by_id = {r["id"]: r["state"] for r in rows}
                return [by_id.get(i, "failed") for i in ids]
            poll.sleep(changed)
    except KeyboardInterrupt:
        jobs = " ".join(str(i) for i in ids)
        sys.stderr.write(f"\nstopped waiting; the job(s) go on (gpumosaic cancel {jobs})\n")
        raise typer.Exit(INTERRUPTED) from None


def _rows_of(client: ServiceClient, ids: list[int], wanted: set[int]) -> list[dict[str, Any]]:
    if len(ids) == 1:
        return [client.job(ids[0])]
    rows = []
    for row in client.iter_jobs(after=min(ids) - 1):
        if row["id"] in wanted:
            rows.append(row)
        if row["id"] >= max(ids):
            break
    return rows


def _progress_line(rows: list[dict[str, Any]], detailed: bool) -> str:
    """One job: its state, steps and rate (steps only when ``detailed``: a line that
    goes to a file changes when the state does). Several: how many are in each state."""
    if len(rows) == 1:
        r = rows[0]
        where = f" on {r['gpu_type']}" if r["gpu_type"] else ""
        text = f"job {r['id']}: {r['state']}{where}"
        if detailed and r["steps"]:
            text += f", {r['steps_done']:,.0f}/{r['steps']:,.0f} steps"
            text += f" ({r['steps_done'] / r['steps']:.0%})"
            if r["steps_per_s"]:
                text += f", {r['steps_per_s']:,.1f} steps/s"
        if r["reason"] and r["state"] != "running":
            text += f" ({r['reason']})"
        return text
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    text = "jobs: " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    if detailed:
        done = sum(r["steps_done"] for r in rows)
        total = sum(r["steps"] for r in rows)
        text += f"; {done:,.0f}/{total:,.0f} steps"
    return text


# ---- times ---------------------------------------------------------------------------


def _iso(epoch: float, utc: bool) -> str:
    """ISO 8601 to the second, in local time with its offset, or UTC with ``Z``."""
    if utc:
        return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")


def _ago(epoch: float, now: float) -> str:
    """How long ago, in the largest whole unit ("2 min ago")."""
    seconds = now - epoch
    if seconds < 1:
        return "just now" if seconds > -60 else "in the future"  # -60: clock skew
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return f"{int(seconds)} s ago"


def _when(epoch: float | None, utc: bool, now: float) -> str:
    """ "2 min ago" for today; the date and time (local or UTC) when older."""
    if epoch is None:
        return "-"
    if now - epoch < 86400:
        return _ago(epoch, now)
    return _iso(epoch, utc).replace("T", " ")[:16] + (" UTC" if utc else "")


UtcOpt = Annotated[bool, typer.Option("--utc", help="times in UTC (default: local time)")]
TIME_FIELDS = ("submitted_at", "started_at", "finished_at")


@app.command(
    "jobs",
    epilog="Example: gpumosaic jobs --server URL --state running --name j1 --json; "
    "gpumosaic jobs --server URL --summary --json",
)
@user_errors
def jobs_command(
    server: ServerOpt = DEFAULT_SERVER,
    token: TokenOpt = "",
    json_out: JsonOpt = False,
    state: Annotated[
        str | None,
        typer.Option(
            help="only jobs in this state: queued, running, done, failed, cancelled, rejected"
        ),
    ] = None,
    name: Annotated[str | None, typer.Option(help="only jobs of this name")] = None,
    utc: UtcOpt = False,
    summary: Annotated[
        bool,
        typer.Option(
            "--summary", help="the run so far, as simulate summarises one (--json: its keys)"
        ),
    ] = False,
) -> None:
    """The service's jobs: state, progress, GPU type and index, attained time, steps/s.

    Attained time grows while a job runs; when each was submitted ("2 min ago")."""
    if summary:
        from gpumosaic.cli.jobs_summary import show_summary

        return show_summary(server, token, json_out, state, name)
    from gpumosaic.runtime.jobs.admission import MAX_NAME_CHARS
    from gpumosaic.runtime.jobs.submission import JOB_STATES

    if state is not None and state not in JOB_STATES:
        raise InputError(f"must be one of {', '.join(JOB_STATES)}", field="--state")
    if name is not None:  # admission's rules for a name: stored stripped, bounded, no NUL
        name = name.strip()
        if len(name) > MAX_NAME_CHARS or "\0" in name:
            raise InputError(f"at most {MAX_NAME_CHARS} characters, no NUL", field="--name")
    rows = ServiceClient(server, token).jobs(state, name)
    if json_out:
        print(json.dumps(rows))
        return
    if not rows:
        asked = [f"state {state}"] if state else []
        asked += [f"name {name!r}"] if name is not None else []
        print("no jobs" + (f" ({shown(', '.join(asked))})" if asked else ""))
        return
    now = time.time()
    # No box (as the README shows it): at 80 columns the cells need the room. Why a job
    # waits is prose: a line under the table per job, not a column squeezed to a few
    # letters.
    table = Table(box=None, pad_edge=False, header_style="bold")
    columns = ("id", "name", "state", "progress", "gpu", "attained", "steps/s")
    for col in (*columns, "submitted"):
        table.add_column(
            col,
            justify="right" if col in ("id", "attained", "steps/s") else "left",
            no_wrap=col == "state",
        )
    for r in rows:
        done, total = r["steps_done"], r["steps"]
        table.add_row(
            *(
                cell(v)
                for v in (
                    str(r["id"]),
                    r["name"],
                    r["state"],
                    f"{done:,.0f} ({done / total:.0%})" if total else "-",
                    _gpu(r),
                    _num(r["attained_s"], "{:,.1f} s"),
                    _num(r["steps_per_s"], "{:,.2f}"),
                    _when(r["submitted_at"], utc, now),
                )
            )
        )
    show(table, ("id", "name", "state", "progress"))
    for r in rows:
        if r["reason"]:
            Console().print(
                shown(f"{r['id']:>3} {r['name']}: {r['reason']}"), markup=False, highlight=False
            )


@app.command(
    epilog="Example: gpumosaic job 3 --server URL",
)
@user_errors
def job(
    job_id: Annotated[int, typer.Argument(help="job id")],
    server: ServerOpt = DEFAULT_SERVER,
    token: TokenOpt = "",
    json_out: JsonOpt = False,
    utc: UtcOpt = False,
) -> None:
    """One job in full (with the tail of its log).

    Times as ISO 8601 (local, or UTC with --utc) and how long ago."""
    _check_id(job_id)
    row = ServiceClient(server, token).job(job_id)
    if json_out:
        print(json.dumps(row))
        return
    tail = row.pop("log_tail", "")
    now = time.time()
    for key, value in row.items():
        value = _shown_value(key, value, row)
        if key in TIME_FIELDS and value is not None:
            value = f"{_iso(value, utc)} ({_ago(value, now)})"
        print(f"{key:>17}: {shown(value)}")
    if tail:
        print("--- log tail ---")
        print(shown(tail.rstrip(), keep_lines=True))


@app.command(
    epilog="Example: gpumosaic logs 3 --server URL --follow",
)
@user_errors
def logs(
    job_id: Annotated[int, typer.Argument(help="job id")],
    server: ServerOpt = DEFAULT_SERVER,
    token: TokenOpt = "",
    tail: Annotated[int, typer.Option(help="bytes from the end (at most 16 MiB)")] = 20000,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="go on printing new output until the job ends (Ctrl-C stops, exit 130)",
        ),
    ] = False,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help='print {"id", "log", "end"} (with --follow: one such '
            'line per read, then {"id", "state"})',
        ),
    ] = False,
) -> None:
    """The job's output (all its leases, newest last)."""
    from gpumosaic.runtime.jobs.admission import MAX_LOG_TAIL_BYTES

    if not 0 <= tail <= MAX_LOG_TAIL_BYTES:
        raise InputError(f"must be from 0 to {MAX_LOG_TAIL_BYTES}", field="--tail", value=tail)
    _check_id(job_id)
    client = ServiceClient(server, token)
    out = LogWriter(job_id, json_out)
    try:
        data, offset = client.log_tail(job_id, tail)
        out.write(data, offset, force=True)  # --json: one line, even for an empty log
        if follow:
            state = _follow(client, job_id, offset, out)
            if json_out:
                print(json.dumps({"id": job_id, "state": state}), flush=True)
    except KeyboardInterrupt:
        raise typer.Exit(INTERRUPTED) from None  # quietly: the user asked to stop


class LogWriter:
    """Log bytes to stdout as they come (``--json``: one JSON object per read, decoded as
    UTF-8 across reads, so a character split between two reads stays whole)."""

    def __init__(self, job_id: int, as_json: bool) -> None:
        self.job_id = job_id
        self.as_json = as_json
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def write(self, data: bytes, end: int, force: bool = False) -> None:
        if self.as_json:
            if data or force:
                text = self.decoder.decode(data)
                print(json.dumps({"id": self.job_id, "log": text, "end": end}), flush=True)
        elif data:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()


def _follow(client: ServiceClient, job_id: int, offset: int, out: LogWriter) -> str:
    """Print the job's new output until it ends and its log is read to the end; its end
    state. The state is read before the log, so the last read follows the end."""
    from gpumosaic.runtime.jobs.submission import TERMINAL_STATES

    poll = Poll(most_s=2.0)
    while True:
        state = str(client.job(job_id)["state"])
        data, offset = client.log_bytes(job_id, offset)
        out.write(data, offset)
        if state in TERMINAL_STATES and not data:
            return state
        if not data or len(data) < LOG_READ_FULL:
            poll.sleep(changed=bool(data))


@app.command(
    epilog="Example: gpumosaic cancel 3 4 5 --server URL",
)
@user_errors
def cancel(
    job_ids: Annotated[list[int], typer.Argument(help="job ids")],
    server: ServerOpt = DEFAULT_SERVER,
    token: TokenOpt = "",
    json_out: JsonOpt = False,
) -> None:
    """Cancel jobs: a running one gets SIGTERM (it checkpoints), then the grace period.

    Every id is tried; one that cannot be cancelled (unknown, already ended) is a line
    on stderr and makes the exit code 2."""
    for job_id in job_ids:
        _check_id(job_id)  # every id checked before any job is touched
    client = ServiceClient(server, token)
    answers: list[dict[str, Any]] = []
    for job_id in dict.fromkeys(job_ids):
        try:
            answer = client.cancel(job_id)
            answers.append({"id": answer["id"], "state": answer["state"]})
            if not json_out:
                print(f"job {answer['id']}: {shown(answer['state'])}", flush=True)
        except InputError as err:
            if err.field == "--server":
                raise  # the service is not there: no point in trying the others
            answers.append({"id": job_id, "error": err.message})
            if not json_out:
                err_console.print(
                    f"[red]error:[/red] job {job_id}: {markup_safe(err.message)}", highlight=False
                )
    if json_out:
        print(json.dumps(answers))
    if any("error" in a for a in answers):
        raise typer.Exit(2)
