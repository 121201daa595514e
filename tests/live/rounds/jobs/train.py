"""A tiny training job for the service tests: steps that sleep, checkpoints via the lease.

Env knobs (set by the tests): STEP_S (seconds per step), FAIL_EXIT (exit with this code
before training), SAVE (0: never checkpoint).
"""

import os
import sys
import time

from gpumosaic.lease import Lease

lease = Lease.from_env()
lease.report_every_s = 0.2
print(f"start pid={os.getpid()} cuda={os.environ.get('CUDA_VISIBLE_DEVICES')!r}", flush=True)
if os.environ.get("FAIL_EXIT"):
    print("failing on purpose", flush=True)
    sys.exit(int(os.environ["FAIL_EXIT"]))
state = lease.load() or {"step": 0, "starts": 0}
state["starts"] += 1
step_s = float(os.environ.get("STEP_S", "0.01"))
for step in lease.steps(start=state["step"]):
    time.sleep(step_s)
    state["step"] = step + 1
if os.environ.get("SAVE", "1") == "1":
    lease.save(state)
print(f"stop at step {state['step']}", flush=True)
