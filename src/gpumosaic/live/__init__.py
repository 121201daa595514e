"""Drivers with a wall clock: services that run real jobs and put gpumosaic's decisions on
real clusters: the round service executing on Ray (live/rounds), the Kubernetes extender
(live/extender) and the GPU time-sharing runtime (live/share)."""
