"""gpumosaic on a Slurm cluster (docs/slurm.md): the cluster read from Slurm
(``cluster``), Slurm's commands (``commands``), and the executor that runs each lease as
Slurm batch jobs (``executor``; each job runs ``rank``)."""

from gpumosaic.runtime.executors.slurm.cluster import read_cluster, slurm_membership
from gpumosaic.runtime.executors.slurm.commands import SlurmCommands, SlurmError
from gpumosaic.runtime.executors.slurm.executor import SlurmExecutor

__all__ = ["SlurmCommands", "SlurmError", "SlurmExecutor", "read_cluster", "slurm_membership"]
