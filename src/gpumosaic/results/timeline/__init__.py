"""A run's timeline: the log of allocations and releases it keeps while it runs
(``log.TimelineLog``) and the compiled replay of that log at the end (``kernel``) that
gives every sample the cluster's fragmentation and power. The event simulator and the
fill replay keep their figures this way."""
