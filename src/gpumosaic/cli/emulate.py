"""``gpumosaic emulate``: an emulated training job (``live/emulate.py``) for ``serve``."""

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
    job_type: Annotated[str, typer.Option(help="a Gavel job type, e.g. 'A3C'")],
    steps: Annotated[
        float | None, typer.Option(help="stop after this many steps (default: the job's)")
    ] = None,
) -> None:
    """A job that steps at Gavel's table rate for its type on the GPU model it was given
    (GPUMOSAIC_GPU_MODEL), times the service's time scale, through gpumosaic.lease."""
    from gpumosaic.lease import LeaseError
    from gpumosaic.live.emulate import EmulationError, run

    if steps is not None and not (0 < steps < math.inf):
        raise InputError("must be a finite number > 0", field="--steps", value=steps)
    try:
        code = run(job_type, steps)
    except LeaseError as err:
        raise InputError(str(err)) from None
    except EmulationError as err:
        raise InputError(str(err), field="--job-type", value=job_type) from None
    sys.exit(code)
