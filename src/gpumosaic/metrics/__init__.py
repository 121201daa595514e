"""Pure functions over a SimResult: JCT, makespan, utilization, fragmentation, energy."""
