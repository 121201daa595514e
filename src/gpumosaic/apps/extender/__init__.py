"""The Kubernetes scheduler extender: FGD, PWR and every other placement of ``placement/``
served to an unmodified kube-scheduler over its extender/v1 HTTP protocol.

Modules: ``admission`` (what input is accepted: limits, quantities, names; one place),
``wire`` (the JSON of k8s.io/kube-scheduler extender/v1), ``openapi`` (the verbs in the
schema), ``vocabulary`` (the ``alibabacloud.com/*`` annotations of pods and nodes),
``nodes`` (the node table; failed nodes' reasons from ``placement.filter``), ``target``
(FGD's target workload, fixed or learned), ``decision`` (one strategy's answer for a
subset of nodes), ``service`` (the state owner: filter, prioritize, bind),
``sqlite_store`` and ``kube`` (where binds are recorded: a SQLite file or the API
server), ``app`` (FastAPI), ``server`` (uvicorn on loopback), ``replay`` (a
kube-scheduler stand-in for replays).
"""
