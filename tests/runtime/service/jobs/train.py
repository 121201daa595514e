"""A tiny training job for the service tests: steps that sleep, checkpoints via the lease.

Env knobs (set by the tests): STEP_S (seconds per step), FAIL_EXIT (exit with this code
before training), SAVE (0: never checkpoint). It holds an exclusive lock on its
checkpoint dir while it runs and exits 7 with "TWICE" if another process of the same job
holds it (the tests assert that never happens).
"""

import fcntl
import os
import sys
import time

from gpumosaic.lease import Lease

lease = Lease.from_env()
lease.report_every_s = 0.2
# One lock per rank: two processes of the same rank of one job must never overlap.
lock = open(os.path.join(lease.checkpoint_dir, f".running-{lease.rank}"), "w")  # noqa: SIM115
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    print("TWICE: another process of this job is running", flush=True)
    sys.exit(7)
cuda = os.environ.get("CUDA_VISIBLE_DEVICES")
if os.environ.get("FAIL_EXIT"):
    print("failing on purpose", flush=True)
    sys.exit(int(os.environ["FAIL_EXIT"]))
state = lease.load() or {"step": 0, "starts": 0}
state["starts"] += 1
print(
    f"start pid={os.getpid()} cuda={cuda} rank={lease.rank}/{lease.world_size} "
    f"from={state['step']}",
    flush=True,
)
step_s = float(os.environ.get("STEP_S", "0.01"))
for step in lease.steps(start=state["step"]):
    time.sleep(step_s)
    state["step"] = step + 1
if os.environ.get("SAVE", "1") == "1":
    lease.save(state)
print(f"stop at step {state['step']}", flush=True)
