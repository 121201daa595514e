"""The interposer's memory cap (``--sharing nvshare:mem_cap=...``): cuMemGetInfo reports
the job's share of device memory and allocations beyond it fail with
CUDA_ERROR_OUT_OF_MEMORY -- real processes, the real interposer, the stand-in libcuda."""

from __future__ import annotations

import json

CUDA_ERROR_OUT_OF_MEMORY = 2


def run(share, *args: str, **env: str) -> dict:
    proc = share.client(*args, extra_env=env)
    out, _err = proc.communicate(timeout=30)
    return json.loads(out.strip().splitlines()[-1])


def test_share_of_the_gpu_is_the_reported_total_and_the_limit(share_factory) -> None:
    share = share_factory(FAKECUDA_MEMORY_MIB="1024")
    # Half the GPU: 512 MiB. Two 200 MiB allocations fit, the third would be 600 MiB.
    out = run(
        share, "--alloc-mib", "200", "--alloc-count", "3", GPUMOSAIC_SHARE_MEM_CAP_MILLI="500"
    )
    assert out["alloc"] == [0, 0, CUDA_ERROR_OUT_OF_MEMORY]
    assert out["total_mib"] == 512
    assert out["free_mib"] == 512 - 400
    # The refused allocation never reached the driver.
    driver_allocs = [c for _, _, c in share.calls() if c == "cuMemAllocManaged"]
    assert len(driver_allocs) == 2


def test_an_explicit_cap_in_mib_wins_and_freed_memory_is_usable_again(share_factory) -> None:
    share = share_factory(FAKECUDA_MEMORY_MIB="1024")
    out = run(
        share,
        "--alloc-mib",
        "64",
        "--alloc-count",
        "2",
        GPUMOSAIC_SHARE_MEM_CAP_MIB="100",
        GPUMOSAIC_SHARE_MEM_CAP_MILLI="900",
    )
    assert out["alloc"] == [0, CUDA_ERROR_OUT_OF_MEMORY]
    assert out["total_mib"] == 100
    assert out["free_mib"] == 36


def test_without_a_cap_the_whole_gpu_is_reported(share_factory) -> None:
    share = share_factory(FAKECUDA_MEMORY_MIB="1024")
    out = run(share, "--alloc-mib", "200", "--alloc-count", "3")
    assert out["alloc"] == [0, 0, 0]
    assert out["total_mib"] == 1024


def test_the_cap_holds_without_a_daemon_socket(share_factory) -> None:
    share = share_factory(FAKECUDA_MEMORY_MIB="1024")
    out = run(
        share,
        "--alloc-mib",
        "200",
        "--alloc-count",
        "2",
        GPUMOSAIC_SHARE_SOCKET="",
        GPUMOSAIC_SHARE_MEM_CAP_MILLI="250",
    )
    assert out["alloc"] == [0, CUDA_ERROR_OUT_OF_MEMORY]
    assert out["total_mib"] == 256
