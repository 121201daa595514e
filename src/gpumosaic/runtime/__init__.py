"""The live platform every live scheduler stands on, with no mechanism in it: the state
(``state``: SQLite store, records, fencing), the HTTP API and its guards (``api``), the
lease table and the job-side contract (``leases``; ``gpumosaic.lease`` is the job's
library), executors behind one contract (``executors``), the process supervisor
(``supervisor``), cluster discovery (``cluster``), the page machinery (``ui``) and the
GPU time-sharing runtime of a node (``share``). docs/architecture.md draws it."""
