"""The fill replay (FGD/PWR's inflation experiment) as a mechanism, simulate only: tasks
never depart; ``simulator.run_fill`` places them in a seeded order until the requested GPU
reaches the inflation target."""
