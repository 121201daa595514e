"""``gpumosaic submit | jobs | job | logs | cancel``: the round service's jobs, over HTTP."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from gpumosaic.cli.app import app, user_errors
from gpumosaic.errors import InputError
from gpumosaic.live.rounds.client import DEFAULT_SERVER, ServiceClient

ServerOpt = Annotated[str, typer.Option(envvar="GPUMOSAIC_SERVER", help="URL of gpumosaic serve")]
TokenOpt = Annotated[str, typer.Option(envvar="GPUMOSAIC_TOKEN", help="the service's token")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]


@app.command(
    epilog='Example: gpumosaic submit --server URL --command "python job.py" --steps 60 '
    "--gpus 1 --gpu-milli 500 --name j1 --json",
)
@user_errors
def submit(
    command: Annotated[
        str | None,
        typer.Option(
            help="the job's command line (with --file: a template, e.g. "
            "'python train.py --model {job_type}')"
        ),
    ] = None,
    steps: Annotated[float | None, typer.Option(help="total training steps")] = None,
    gpus: Annotated[int, typer.Option(help="GPUs (a gang if > 1)")] = 1,
    gpu_milli: Annotated[int, typer.Option(help="share of each GPU, 1..1000")] = 1000,
    name: Annotated[str, typer.Option(help="a name to show")] = "",
    gpu_models: Annotated[
        str, typer.Option(help="allowed GPU models, comma-separated (default: any)")
    ] = "",
    priority_weight: Annotated[float, typer.Option(help="the policy's weight")] = 1.0,
    job_type: Annotated[
        str, typer.Option(help="a Gavel job type: its throughput is the prior")
    ] = "",
    workdir: Annotated[str, typer.Option(help="working directory of the job")] = "",
    env: Annotated[
        list[str] | None, typer.Option(help="KEY=VALUE for the job's environment (repeat)")
    ] = None,
    max_retries: Annotated[int | None, typer.Option(help="retries if the command fails")] = None,
    file: Annotated[
        Path | None,
        typer.Option(help="a CSV/YAML job list (the simulate format); --command is run for each"),
    ] = None,
    server: ServerOpt = DEFAULT_SERVER,
    token: TokenOpt = "",
    json_out: JsonOpt = False,
) -> None:
    """Submit a job (or a job list: every row checked first, then all or none); prints
    the id(s)."""
    from gpumosaic.live.rounds.admission import check_job

    if command is None:
        raise InputError("give the job's command line", field="--command")
    environ: dict[str, str] = {}
    for item in env or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"{item!r} is not KEY=VALUE", field="--env")
        environ[key] = value
    base: dict[str, Any] = {
        "command": command,
        "gpus": gpus,
        "gpu_milli": gpu_milli,
        "name": name,
        "gpu_models": [m.strip() for m in gpu_models.split(",") if m.strip()],
        "priority_weight": priority_weight,
        "job_type": job_type,
        "workdir": workdir or str(Path.cwd()),
        "env": environ,
        "max_retries": max_retries,
    }
    client = ServiceClient(server, token)
    if file is None:
        if steps is None:
            raise InputError("give the job's total steps", field="--steps")
        job = {**base, "steps": steps}
        check_job(job, flags=True)  # the service's own rules, before anything is sent
        ids = [client.submit(job)]
    else:
        jobs, rows = _from_job_list(file, base)
        for job, row in zip(jobs, rows, strict=True):
            check_job(job, path=str(file), row=row)
        try:
            ids = client.submit_batch(jobs)
        except InputError as err:
            if err.row is None:
                raise
            raise InputError(
                err.message, path=file, row=rows[err.row - 1], field=err.field
            ) from None
    if json_out:
        print(json.dumps({"id": ids[0]} if file is None else {"ids": ids}))
    else:
        print("\n".join(str(i) for i in ids))


def _from_job_list(path: Path, base: dict[str, Any]) -> tuple[list[dict[str, Any]], list[int]]:
    """Jobs of a simulate job list and the row each came from: shapes, steps (or
    duration_s as steps), models, weight, name and job type from the file; the command
    from the --command template. Arrival times are not replayed: every job is submitted
    now."""
    from gpumosaic.traces.joblist import load_job_list

    job_list = load_job_list(path)
    out, rows = [], []
    for index, spec in enumerate(job_list.jobs):
        row = job_list.row(spec.id) or index + 1
        if spec.num_gpu < 1:
            raise InputError(
                "the round service runs GPU jobs; num_gpu must be >= 1",
                path=path,
                row=row,
                field="num_gpu",
            )
        fields = {
            "id": spec.id,
            "name": spec.name,
            "job_type": spec.job_type,
            "steps": f"{spec.work:g}",
        }
        try:
            command = str(base["command"]).format(**fields)
        except (KeyError, IndexError, ValueError) as err:
            raise InputError(
                f"bad placeholder {err} (known: {', '.join(fields)})", field="--command"
            ) from None
        out.append(
            {
                **base,
                "command": command,
                "steps": spec.work,
                "gpus": spec.num_gpu,
                "gpu_milli": spec.gpu_milli,
                "name": spec.name,
                "job_type": spec.job_type if spec.job_type != "job" else "",
                "gpu_models": sorted(spec.allowed_models or ()),
                "priority_weight": spec.priority_weight,
            }
        )
        rows.append(row)
    return out, rows


def _check_id(job_id: int) -> None:
    from gpumosaic.live.rounds.admission import MAX_ID

    if not 1 <= job_id <= MAX_ID:
        raise InputError(f"a job id is from 1 to {MAX_ID}", field="JOB_ID", value=job_id)


def _num(v: Any, fmt: str = "{:,.0f}") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


@app.command(
    "jobs",
    epilog="Example: gpumosaic jobs --server URL --json",
)
@user_errors
def jobs_command(
    server: ServerOpt = DEFAULT_SERVER, token: TokenOpt = "", json_out: JsonOpt = False
) -> None:
    """The service's jobs: state, progress, GPU type and index, attained time, steps/s."""
    rows = ServiceClient(server, token).jobs()
    if json_out:
        print(json.dumps(rows))
        return
    table = Table()
    for col in ("id", "name", "state", "progress", "gpu", "index", "attained", "steps/s", "why"):
        table.add_column(col, justify="right" if col in ("id", "attained", "steps/s") else "left")
    for r in rows:
        done, total = r["steps_done"], r["steps"]
        table.add_row(
            str(r["id"]),
            r["name"],
            r["state"],
            f"{done:,.0f} ({done / total:.0%})" if total else "-",
            r["gpu_type"] or "-",
            r["gpu_index"] or "-",
            _num(r["attained_s"], "{:,.1f} s"),
            _num(r["steps_per_s"], "{:,.2f}"),
            r["reason"],
        )
    Console().print(table)


@app.command(
    epilog="Example: gpumosaic job 3 --server URL",
)
@user_errors
def job(
    job_id: Annotated[int, typer.Argument(help="job id")],
    server: ServerOpt = DEFAULT_SERVER,
    token: TokenOpt = "",
    json_out: JsonOpt = False,
) -> None:
    """One job in full (with the tail of its log)."""
    _check_id(job_id)
    row = ServiceClient(server, token).job(job_id)
    if json_out:
        print(json.dumps(row))
        return
    tail = row.pop("log_tail", "")
    for key, value in row.items():
        print(f"{key:>17}: {value}")
    if tail:
        print("--- log tail ---")
        print(tail.rstrip())


@app.command(
    epilog="Example: gpumosaic logs 3 --server URL",
)
@user_errors
def logs(
    job_id: Annotated[int, typer.Argument(help="job id")],
    server: ServerOpt = DEFAULT_SERVER,
    token: TokenOpt = "",
    tail: Annotated[int, typer.Option(help="bytes from the end (at most 16 MiB)")] = 20000,
) -> None:
    """The job's output (all its leases, newest last)."""
    from gpumosaic.live.rounds.admission import MAX_LOG_TAIL_BYTES

    if not 0 <= tail <= MAX_LOG_TAIL_BYTES:
        raise InputError(f"must be from 0 to {MAX_LOG_TAIL_BYTES}", field="--tail", value=tail)
    _check_id(job_id)
    print(ServiceClient(server, token).logs(job_id, tail), end="")


@app.command(
    epilog="Example: gpumosaic cancel 3 --server URL",
)
@user_errors
def cancel(
    job_id: Annotated[int, typer.Argument(help="job id")],
    server: ServerOpt = DEFAULT_SERVER,
    token: TokenOpt = "",
) -> None:
    """Cancel a job: a running one gets SIGTERM (it checkpoints), then the grace period."""
    _check_id(job_id)
    answer = ServiceClient(server, token).cancel(job_id)
    print(f"job {answer['id']}: {answer['state']}")
