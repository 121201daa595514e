"""What a run produced, simulated or live: the result (``result.SimResult`` and its job
records), the one job table and timeline table (``columns``, ``timeline``), the summary
and its figures (``summary``: JCT, makespan, utilization, fragmentation, energy;
``fairness``), and the run's outcome with the lines about jobs that never fit."""
