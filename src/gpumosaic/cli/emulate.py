"""``gpumosaic emulate``: an emulated training job (``runtime/emulate.py``) for ``serve``."""

from __future__ import annotations

import math
import sys
from typing import Annotated

import typer

from gpumosaic.cli.app import app, user_errors
from gpumosaic.errors import InputError


@app.command(
    epilog='Example: gpumosaic submit --command "gpumosaic emulate --job-type '
    "'ResNet-18 (batch size 64)'\" --steps 20000 --job-type 'ResNet-18 (batch size 64)'"
)
@user_errors
def emulate(
    job_type: Annotated[str, typer.Option(help="a Gavel job type, e.g. 'A3C'")] = "",
    steps: Annotated[
        float | None, typer.Option(help="stop after this many steps (default: the job's)")
    ] = None,
    rates: Annotated[
        str | None,
        typer.Option(help="MODEL=R,...: steps/s (job time) on each GPU model, not the table's"),
    ] = None,
) -> None:
    """A job that steps at Gavel's table rate for its type (or at --rates) on the GPU
    model it was given (GPUMOSAIC_GPU_MODEL), times the service's time scale, through
    gpumosaic.lease."""
    from gpumosaic.lease import LeaseError
    from gpumosaic.runtime.emulate import EmulationError, parse_rates, run

    if steps is not None and not (0 < steps < math.inf):
        raise InputError("must be a finite number > 0", field="--steps", value=steps)
    if not job_type and rates is None:
        raise InputError("give --job-type (Gavel's table rate) or --rates MODEL=R,...")
    try:
        given = parse_rates(rates) if rates is not None else None
    except EmulationError as err:
        raise InputError(str(err), field="--rates", value=rates) from None
    try:
        code = run(job_type, steps, rates=given)
    except LeaseError as err:
        raise InputError(str(err)) from None
    except EmulationError as err:
        flag = "--rates" if given is not None else "--job-type"
        raise InputError(str(err), field=flag, value=rates or job_type) from None
    sys.exit(code)
