"""Mechanisms: *when* jobs run. One package each, like a scheduler-framework plug-in,
holding its clock-free decision and admission rules, its simulated driver, its live
driver over ``gpumosaic.runtime`` (where it has one), its ``/ui`` view and its plug-in
(``plugin.py``, registered in ``run/registry.py``); ``contract`` is what every plug-in
implements. Mechanisms do not import each other (import-linter's contract).

- ``event``: a queue order + placement at every arrival and completion;
- ``rounds``: Gavel's rounds (policy solve, priorities, leases), simulated and live;
- ``gandiva``: Gandiva's time-slicing, packing and migration, simulated and live;
- ``fill``: the FGD/PWR inflation replay (simulate only).
"""
