"""``gpumosaic submit``: a job, or a job list (every row checked first, then all or
none), to the round service over HTTP; ``--wait`` follows them to their ends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from gpumosaic.cli.app import app, user_errors
from gpumosaic.cli.jobs import JsonOpt, ServerOpt, TokenOpt, _wait_exit_code, _wait_for
from gpumosaic.errors import InputError
from gpumosaic.runtime.api.client import DEFAULT_SERVER, ServiceClient


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
    rates: Annotated[
        str | None,
        typer.Option(
            help="MODEL=R,...: the job's known steps/s on each GPU model, its prior "
            "(not profiled); with --file, every job's"
        ),
    ] = None,
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
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="wait until the job(s) end, a progress line on stderr; exit 0 when all "
            "are done, 1 when one failed or was rejected, 3 when one was cancelled",
        ),
    ] = False,
) -> None:
    """Submit a job (or a job list: every row checked first, then all or none); prints
    the id(s)."""
    from gpumosaic.runtime.emulate import EmulationError, parse_rates
    from gpumosaic.runtime.jobs.submission import check_job

    if command is None:
        raise InputError("give the job's command line", field="--command")
    environ: dict[str, str] = {}
    for item in env or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"{item!r} is not KEY=VALUE", field="--env")
        environ[key] = value
    try:  # the grammar of emulate --rates
        known_rates = parse_rates(rates) if rates is not None else {}
    except EmulationError as err:
        raise InputError(str(err), field="--rates", value=rates) from None
    base: dict[str, Any] = {
        "command": command,
        "gpus": gpus,
        "gpu_milli": gpu_milli,
        "name": name,
        "gpu_models": [m.strip() for m in gpu_models.split(",") if m.strip()],
        "priority_weight": priority_weight,
        "job_type": job_type,
        "rates": known_rates,
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
    answer: dict[str, Any] = {"id": ids[0]} if file is None else {"ids": ids}
    if not json_out:
        print("\n".join(str(i) for i in ids), flush=True)
    if not wait:
        if json_out:
            print(json.dumps(answer))
        return
    states = _wait_for(client, ids)
    if json_out:
        answer.update({"state": states[0]} if file is None else {"states": states})
        print(json.dumps(answer))
    raise typer.Exit(_wait_exit_code(states))


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
