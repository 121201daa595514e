"""A tiny numpy training loop under gpumosaic's leases: linear regression by SGD.

Run it through the service (it needs the variables ``gpumosaic serve`` sets)::

    gpumosaic submit --command "python examples/numpy_train.py" --steps 2000 --gpu-milli 500

It resumes from its last checkpoint after every preemption, and stops when the lease
ends or all steps are done. No GPU is used: it shows the lease and checkpoint API.
"""

import numpy as np

from gpumosaic.lease import Lease

lease = Lease.from_env()
rng = np.random.default_rng(0)
true_w = rng.normal(size=8)
state = lease.load() or {"step": 0, "w": [0.0] * 8, "loss": None}
w = np.array(state["w"])


def snapshot() -> dict:
    """The state to checkpoint (the lease saves it every minute and at each extension)."""
    return {**state, "w": w.tolist()}


for step in lease.steps(start=state["step"], save=snapshot):
    x = rng.normal(size=(64, 8))
    y = x @ true_w + 0.01 * rng.normal(size=64)
    grad = 2 * x.T @ (x @ w - y) / len(y)
    w -= 0.05 * grad
    state["step"] = step + 1
    state["loss"] = float(np.mean((x @ w - y) ** 2))
lease.save(snapshot())
print(f"lease over at step {state['step']}, loss {state['loss']}", flush=True)
