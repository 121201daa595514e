/* The slice of the CUDA driver API that the share interposer hooks, shared by the
 * interposer and the stand-in libcuda used by the tests. Opaque handles are pointers;
 * CUdeviceptr is 64-bit, as in cuda.h since CUDA 3.2. Written from the public API
 * reference, not copied from cuda.h. */
#ifndef GPUMOSAIC_CUDA_API_H
#define GPUMOSAIC_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUfunction;
typedef void *CUarray;
typedef uint64_t cuuint64_t;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NOT_FOUND 500
#define CUDA_ERROR_UNKNOWN 999
#define CU_MEM_ATTACH_GLOBAL 0x1
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 0x2

/* The gated entry points: X(symbol, parameter list, argument list). Every cuMemcpy*
 * variant of the driver API (plain, Async, per-thread-default-stream _ptds/_ptsz),
 * cuLaunchKernel, and (beyond nvshare) the other ways to start GPU work: extended and
 * cooperative launches and CUDA graph launches. */
#define GPUMOSAIC_GATED_CALLS(X) \
  X(cuLaunchKernelEx, (const void *config, CUfunction fn, void **params, void **extra), (config, fn, params, extra)) \
  X(cuLaunchKernelEx_ptsz, (const void *config, CUfunction fn, void **params, void **extra), (config, fn, params, extra)) \
  X(cuLaunchCooperativeKernel, (CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shm, CUstream s, void **params), (fn, gx, gy, gz, bx, by, bz, shm, s, params)) \
  X(cuLaunchCooperativeKernel_ptsz, (CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shm, CUstream s, void **params), (fn, gx, gy, gz, bx, by, bz, shm, s, params)) \
  X(cuGraphLaunch, (void *graph_exec, CUstream s), (graph_exec, s)) \
  X(cuGraphLaunch_ptsz, (void *graph_exec, CUstream s), (graph_exec, s)) \
  X(cuLaunchKernel, (CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shm, CUstream s, void **params, void **extra), (fn, gx, gy, gz, bx, by, bz, shm, s, params, extra)) \
  X(cuLaunchKernel_ptsz, (CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shm, CUstream s, void **params, void **extra), (fn, gx, gy, gz, bx, by, bz, shm, s, params, extra)) \
  X(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n)) \
  X(cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n)) \
  X(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s)) \
  X(cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s)) \
  X(cuMemcpyPeer, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n), (dst, dc, src, sc, n)) \
  X(cuMemcpyPeer_ptds, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n), (dst, dc, src, sc, n)) \
  X(cuMemcpyPeerAsync, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s), (dst, dc, src, sc, n, s)) \
  X(cuMemcpyPeerAsync_ptsz, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s), (dst, dc, src, sc, n, s)) \
  X(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t n), (dst, src, n)) \
  X(cuMemcpyHtoD_v2_ptds, (CUdeviceptr dst, const void *src, size_t n), (dst, src, n)) \
  X(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n), (dst, src, n)) \
  X(cuMemcpyDtoH_v2_ptds, (void *dst, CUdeviceptr src, size_t n), (dst, src, n)) \
  X(cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n)) \
  X(cuMemcpyDtoD_v2_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n)) \
  X(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t n, CUstream s), (dst, src, n, s)) \
  X(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr dst, const void *src, size_t n, CUstream s), (dst, src, n, s)) \
  X(cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s)) \
  X(cuMemcpyDtoHAsync_v2_ptsz, (void *dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s)) \
  X(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s)) \
  X(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s)) \
  X(cuMemcpyDtoA_v2, (CUarray dst, size_t off, CUdeviceptr src, size_t n), (dst, off, src, n)) \
  X(cuMemcpyDtoA_v2_ptds, (CUarray dst, size_t off, CUdeviceptr src, size_t n), (dst, off, src, n)) \
  X(cuMemcpyAtoD_v2, (CUdeviceptr dst, CUarray src, size_t off, size_t n), (dst, src, off, n)) \
  X(cuMemcpyAtoD_v2_ptds, (CUdeviceptr dst, CUarray src, size_t off, size_t n), (dst, src, off, n)) \
  X(cuMemcpyHtoA_v2, (CUarray dst, size_t off, const void *src, size_t n), (dst, off, src, n)) \
  X(cuMemcpyHtoA_v2_ptds, (CUarray dst, size_t off, const void *src, size_t n), (dst, off, src, n)) \
  X(cuMemcpyAtoH_v2, (void *dst, CUarray src, size_t off, size_t n), (dst, src, off, n)) \
  X(cuMemcpyAtoH_v2_ptds, (void *dst, CUarray src, size_t off, size_t n), (dst, src, off, n)) \
  X(cuMemcpyAtoA_v2, (CUarray dst, size_t doff, CUarray src, size_t soff, size_t n), (dst, doff, src, soff, n)) \
  X(cuMemcpyAtoA_v2_ptds, (CUarray dst, size_t doff, CUarray src, size_t soff, size_t n), (dst, doff, src, soff, n)) \
  X(cuMemcpyHtoAAsync_v2, (CUarray dst, size_t off, const void *src, size_t n, CUstream s), (dst, off, src, n, s)) \
  X(cuMemcpyHtoAAsync_v2_ptsz, (CUarray dst, size_t off, const void *src, size_t n, CUstream s), (dst, off, src, n, s)) \
  X(cuMemcpyAtoHAsync_v2, (void *dst, CUarray src, size_t off, size_t n, CUstream s), (dst, src, off, n, s)) \
  X(cuMemcpyAtoHAsync_v2_ptsz, (void *dst, CUarray src, size_t off, size_t n, CUstream s), (dst, src, off, n, s)) \
  X(cuMemcpy2D_v2, (const void *copy), (copy)) \
  X(cuMemcpy2D_v2_ptds, (const void *copy), (copy)) \
  X(cuMemcpy2DUnaligned_v2, (const void *copy), (copy)) \
  X(cuMemcpy2DUnaligned_v2_ptds, (const void *copy), (copy)) \
  X(cuMemcpy2DAsync_v2, (const void *copy, CUstream s), (copy, s)) \
  X(cuMemcpy2DAsync_v2_ptsz, (const void *copy, CUstream s), (copy, s)) \
  X(cuMemcpy3D_v2, (const void *copy), (copy)) \
  X(cuMemcpy3D_v2_ptds, (const void *copy), (copy)) \
  X(cuMemcpy3DAsync_v2, (const void *copy, CUstream s), (copy, s)) \
  X(cuMemcpy3DAsync_v2_ptsz, (const void *copy, CUstream s), (copy, s)) \
  X(cuMemcpy3DPeer, (const void *copy), (copy)) \
  X(cuMemcpy3DPeer_ptds, (const void *copy), (copy)) \
  X(cuMemcpy3DPeerAsync, (const void *copy, CUstream s), (copy, s)) \
  X(cuMemcpy3DPeerAsync_ptsz, (const void *copy, CUstream s), (copy, s))

#endif
