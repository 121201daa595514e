"""``gpumosaic slurm setup``: prepare a Slurm cluster for ``serve --executor slurm``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpumosaic.cli.app import WrappingGroup, app, user_errors

slurm_app = typer.Typer(
    rich_markup_mode=None,
    cls=WrappingGroup,
    help="Set a Slurm cluster up for gpumosaic serve --executor slurm (docs/slurm.md).",
    no_args_is_help=True,
)
app.add_typer(slurm_app, name="slurm")


@slurm_app.command(
    "setup",
    epilog="Example: gpumosaic slurm setup --conf /etc/slurm/slurm.conf --partition gpumosaic",
)
@user_errors
def setup_cmd(
    conf: Annotated[Path, typer.Option(help="the cluster's slurm.conf (edited in place)")],
    partition: Annotated[str, typer.Option(help="the partition whose jobs gpumosaic starts")],
    service_uid: Annotated[
        int, typer.Option(help="the user id gpumosaic serve runs as (its own jobs run freely)")
    ] = 0,
) -> None:
    """Add to slurm.conf (idempotently) what adopting sbatch jobs needs, and write
    job_submit.lua beside it; then restart slurmctld."""
    from gpumosaic.runtime.executors.slurm.setup import setup

    result = setup(conf, partition, service_uid)
    if not result.changed:
        typer.echo(f"{conf}: already set up for partition {partition}; nothing changed")
        return
    for what in result.changed:
        typer.echo(f"{conf.parent}: {what}")
    typer.echo(
        "now restart slurmctld (a job_submit plugin is read at its start), then run "
        "scontrol reconfigure (every slurmd reads the same slurm.conf)"
    )
