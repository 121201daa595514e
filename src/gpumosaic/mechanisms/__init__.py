"""Mechanisms: *when* jobs run. The decisions of a scheduling step, with no clock of their
own: drivers (``sim/`` with a simulated clock, live services with a wall clock) call
them with plain state and ``now``.

- ``event``: the scheduling pass of the event mechanism (queue order + placement);
- ``rounds``: Gavel's rounds (policy solve, priorities, leases).
"""
