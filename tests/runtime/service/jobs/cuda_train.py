"""A training job that drives a CUDA driver through ctypes (the stand-in libcuda in the
sharing tests): each step launches KERNELS kernels and synchronizes, so under
``serve --sharing nvshare:...`` every step goes through the interposer's lock.

Env knobs: KERNELS (per step, default 20), ALLOC_MIB (allocated at start, default 0),
STEP_S (extra sleep per step). It prints ``meminfo total_mib=... free_mib=...`` and
``alloc rc=...`` once, and exits 3 if a launch fails.
"""

import ctypes
import os
import sys
import time

from gpumosaic.lease import Lease

lease = Lease.from_env()
lease.report_every_s = 0.2
cuda = ctypes.CDLL("libcuda.so.1")
if cuda.cuInit(0) != 0:
    print("cuInit failed", flush=True)
    sys.exit(3)
alloc_mib = float(os.environ.get("ALLOC_MIB", "0"))
if alloc_mib:
    ptr = ctypes.c_ulonglong(0)
    rc = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(int(alloc_mib * 2**20)))
    print(f"alloc rc={rc}", flush=True)
free_b, total_b = ctypes.c_size_t(0), ctypes.c_size_t(0)
cuda.cuMemGetInfo_v2(ctypes.byref(free_b), ctypes.byref(total_b))
print(f"meminfo total_mib={total_b.value / 2**20:g} free_mib={free_b.value / 2**20:g}", flush=True)
launch = cuda.cuLaunchKernel
launch.argtypes = [ctypes.c_void_p, *([ctypes.c_uint] * 7), ctypes.c_void_p] + [ctypes.c_void_p] * 2
kernels = int(os.environ.get("KERNELS", "20"))
step_s = float(os.environ.get("STEP_S", "0"))
state = lease.load() or {"step": 0}
print(f"start pid={os.getpid()} from={state['step']}", flush=True)
for step in lease.steps(start=state["step"]):
    for _ in range(kernels):
        if launch(None, 1, 1, 1, 1, 1, 1, 0, None, None, None) != 0:
            print("launch failed", flush=True)
            sys.exit(3)
    cuda.cuCtxSynchronize()
    time.sleep(step_s)
    state["step"] = step + 1
lease.save(state)
print(f"stop at step {state['step']}", flush=True)
