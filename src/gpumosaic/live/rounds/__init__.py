"""The round-based scheduler as a service: Gavel's physical mode, rebuilt on Ray.

``gpumosaic serve`` runs four parts, each with one concept:

- ``store``: SQLite (WAL) with the jobs, leases, measured throughputs, rounds and events;
  the only state that survives a restart;
- ``driver``: the wall-clock round loop around the very ``RoundDecider`` the simulator
  drives (``mechanisms/rounds/decision.py``), fed with the steps the jobs report;
- ``ray_executor`` / ``executor``: run a lease as a subprocess inside a Ray actor (or, for
  benchmarks and fast tests, in-process with modelled progress);
- ``api``: the FastAPI app (jobs, leases, ``/metrics``, ``/healthz``).

``gpumosaic.lease`` is the job side (stdlib only). docs/live.md explains the design.
"""
