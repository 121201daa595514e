"""``gpumosaic sim-vs-live``: a workload run on a local live service and in the simulator,
side by side. ``inputs`` (the options, the jobs, the live cluster), ``rounds`` (Gavel's
rounds: ``serve`` against ``simulate --mechanism rounds``), ``gandiva`` (``serve
--mechanism gandiva`` against its simulation; its live side ``gandiva_live``, its counts
``counts``), ``sharing`` (``--sharing nvshare:...`` on
both sides) and ``agreement`` (what every comparison reports)."""
