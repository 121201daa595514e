"""A CUDA client process for the share tests: drives libcuda through ctypes.

ctypes finds functions with dlsym, so under the interposer every call below goes through
its dlsym hook; ``--via getproc`` fetches cuLaunchKernel with cuGetProcAddress_v2 instead.
Usage: worker.py --kernels N [--alloc-mib M] [--park-after-s P] [--idle-s S --kernels-after K]
[--hold-s H] [--go-file F]. ``--go-file``: launch only once F exists (racing clients start
together). ``--park-after-s``: P s after the first kernels, park as a lease does at a
round boundary (``gpumosaic.lease.share_park``, twice: the second has nothing to release).
Prints one JSON line with the return codes; exits 3 if a CUDA call failed.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import threading
import time

CU_LAUNCH = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    *([ctypes.c_uint] * 7),
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=0)
    ap.add_argument("--alloc-mib", type=float, default=0)
    ap.add_argument("--alloc-count", type=int, default=1)
    ap.add_argument("--idle-s", type=float, default=0)
    ap.add_argument("--kernels-after", type=int, default=0)
    ap.add_argument("--hold-s", type=float, default=0)
    ap.add_argument("--park-after-s", type=float, default=None)
    ap.add_argument("--free", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="launch from this many threads")
    ap.add_argument("--via", choices=("dlsym", "getproc", "getproc-ptds"), default="dlsym")
    ap.add_argument("--go-file", default=None, help="launch once this file exists (a start line)")
    args = ap.parse_args()
    cuda = ctypes.CDLL("libcuda.so.1")
    out: dict[str, object] = {"init": cuda.cuInit(0)}
    ptrs = []
    for _ in range(args.alloc_count if args.alloc_mib else 0):
        ptr = ctypes.c_ulonglong(0)
        rc = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(int(args.alloc_mib * 2**20)))
        out.setdefault("alloc", []).append(rc)  # type: ignore[union-attr]
        ptrs.append(ptr)
    free_b, total_b = ctypes.c_size_t(0), ctypes.c_size_t(0)
    out["meminfo"] = cuda.cuMemGetInfo_v2(ctypes.byref(free_b), ctypes.byref(total_b))
    out["free_mib"], out["total_mib"] = free_b.value / 2**20, total_b.value / 2**20
    if args.via == "dlsym":
        launch = cuda.cuLaunchKernel
        launch.argtypes = CU_LAUNCH._argtypes_
    else:
        pfn, status = ctypes.c_void_p(0), ctypes.c_int(0)
        flags = 2 if args.via == "getproc-ptds" else 0
        gpa = cuda.cuGetProcAddress_v2
        gpa.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
        gpa.argtypes += [ctypes.c_uint64, ctypes.POINTER(ctypes.c_int)]
        out["getproc"] = gpa(
            b"cuLaunchKernel", ctypes.byref(pfn), 12000, flags, ctypes.byref(status)
        )
        launch = CU_LAUNCH(pfn.value)
    rcs = set()

    def launches(n: int) -> None:  # ctypes drops the GIL: the threads really overlap
        for _ in range(n):
            rcs.add(launch(None, 1, 1, 1, 1, 1, 1, 0, None, None, None))

    while args.go_file is not None and not os.path.exists(args.go_file):
        time.sleep(0.005)  # racing clients start their launches together
    threads = [
        threading.Thread(target=launches, args=(args.kernels // args.threads,))
        for _ in range(args.threads)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rcs.add(cuda.cuCtxSynchronize())
    if args.park_after_s is not None:
        from gpumosaic.lease import share_park

        time.sleep(args.park_after_s)
        out["park"] = [share_park(), share_park()]
    if args.idle_s:
        time.sleep(args.idle_s)
        for _ in range(args.kernels_after):
            rcs.add(launch(None, 1, 1, 1, 1, 1, 1, 0, None, None, None))
        rcs.add(cuda.cuCtxSynchronize())
    if args.free:
        for ptr in ptrs:
            rcs.add(cuda.cuMemFree_v2(ptr))
    time.sleep(args.hold_s)
    out["rcs"] = sorted(rcs)
    print(json.dumps(out), flush=True)
    return 0 if rcs == {0} and out["init"] == 0 else 3


if __name__ == "__main__":
    sys.exit(main())
