/* A stand-in libcuda.so.1 for the share tests (CPU only). It implements the entry points
 * the interposer hooks, cuGetProcAddress(_v2), cuCtxSynchronize and the context calls,
 * keeps simulated device memory, runs "kernels" as busy time on a simulated device clock
 * and logs each call with a CLOCK_MONOTONIC timestamp, one line per call:
 *   <ns> <pid> <call> [detail]
 * Environment: FAKECUDA_LOG (log file, appended; unset = no log), FAKECUDA_MEMORY_MIB
 * (device memory, default 1024), FAKECUDA_KERNEL_US (kernel length, default 1000, read at
 * each launch), FAKECUDA_DEVICE_FILE (optional: the processes that name the same file
 * share one device clock, so kernels of processes running at once queue behind each
 * other as on one real GPU; unset = each process has a device of its own). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "cuda_api.h"

#define EXPORT __attribute__((visibility("default")))
#define MIB (1024ULL * 1024ULL)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized, log_fd = -2, device_fd = -2;
static long long busy_until_ns;
static unsigned long long device_bytes, managed_bytes, next_addr = 0x100000000ULL;
struct block { CUdeviceptr ptr; size_t size; int managed; };
static struct block blocks[4096];
static int n_blocks;

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static unsigned long long memory_bytes(void) {
  const char *v = getenv("FAKECUDA_MEMORY_MIB");
  return (unsigned long long)(v && *v ? atof(v) : 1024.0) * MIB;
}

static long long kernel_ns(void) {
  const char *v = getenv("FAKECUDA_KERNEL_US");
  return (long long)((v && *v ? atof(v) : 1000.0) * 1000.0);
}

static void log_call(const char *call, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_call(const char *call, const char *fmt, ...) {
  if (log_fd == -2) {
    const char *path = getenv("FAKECUDA_LOG");
    log_fd = path && *path ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
  }
  if (log_fd < 0) return;
  char buf[256];
  int n = snprintf(buf, sizeof buf, "%lld %d %s ", now_ns(), (int)getpid(), call);
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof buf - 2) n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  ssize_t w = write(log_fd, buf, (size_t)n); /* O_APPEND: one line stays whole */
  (void)w;
}

/* Queue `ns` of device work behind what is already queued: this process's, and with
 * FAKECUDA_DEVICE_FILE every process's (the file holds the shared device's busy-until,
 * CLOCK_MONOTONIC ns, updated under flock). Called with `mu` held. */
static long long shared_start(long long start, long long ns) {
  if (device_fd == -2) {
    const char *path = getenv("FAKECUDA_DEVICE_FILE");
    device_fd = path && *path ? open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1;
  }
  if (device_fd < 0 || flock(device_fd, LOCK_EX) != 0) return start;
  long long until = 0;
  if (pread(device_fd, &until, sizeof until, 0) != (ssize_t)sizeof until) until = 0;
  if (until > start) start = until;
  long long end = start + ns;
  ssize_t w = pwrite(device_fd, &end, sizeof end, 0);
  (void)w;
  flock(device_fd, LOCK_UN);
  return start;
}

static void enqueue(long long ns) {
  pthread_mutex_lock(&mu);
  long long now = now_ns();
  long long start = shared_start(busy_until_ns > now ? busy_until_ns : now, ns);
  busy_until_ns = start + ns;
  pthread_mutex_unlock(&mu);
}

static long long drain(void) {
  pthread_mutex_lock(&mu);
  long long until = busy_until_ns;
  pthread_mutex_unlock(&mu);
  long long wait = until - now_ns();
  if (wait > 0) {
    struct timespec ts = {wait / 1000000000LL, wait % 1000000000LL};
    nanosleep(&ts, NULL);
  }
  return wait > 0 ? wait : 0;
}

EXPORT CUresult cuInit(unsigned flags) {
  initialized = 1;
  log_call("cuInit", "flags=%u", flags);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx) {
  if (ctx) *ctx = initialized ? (CUcontext)0x1 : NULL;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  (void)ctx;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void) {
  long long waited = drain();
  log_call("cuCtxSynchronize", "waited_us=%lld", waited / 1000);
  return CUDA_SUCCESS;
}

static CUresult allocate(CUdeviceptr *dptr, size_t size, int managed) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!dptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  CUresult rc = CUDA_SUCCESS;
  if (n_blocks == (int)(sizeof blocks / sizeof blocks[0])) rc = CUDA_ERROR_OUT_OF_MEMORY;
  else if (!managed && device_bytes + size > memory_bytes()) rc = CUDA_ERROR_OUT_OF_MEMORY;
  if (rc == CUDA_SUCCESS) {
    *dptr = next_addr;
    next_addr += (size + 0xFFFFF) & ~0xFFFFFULL;
    blocks[n_blocks++] = (struct block){*dptr, size, managed};
    if (managed) managed_bytes += size; else device_bytes += size;
  }
  pthread_mutex_unlock(&mu);
  log_call(managed ? "cuMemAllocManaged" : "cuMemAlloc_v2", "bytes=%zu rc=%d", size, rc);
  return rc;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) { return allocate(dptr, size, 0); }

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned flags) {
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != 0x2 && flags != 0x4) return CUDA_ERROR_INVALID_VALUE;
  return allocate(dptr, size, 1);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < n_blocks; i++) {
    if (blocks[i].ptr == ptr) {
      if (blocks[i].managed) managed_bytes -= blocks[i].size; else device_bytes -= blocks[i].size;
      blocks[i] = blocks[--n_blocks];
      rc = CUDA_SUCCESS;
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  log_call("cuMemFree_v2", "rc=%d", rc);
  return rc;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  unsigned long long total = memory_bytes();
  pthread_mutex_lock(&mu);
  unsigned long long used = device_bytes + managed_bytes;
  pthread_mutex_unlock(&mu);
  if (free_b) *free_b = (size_t)(used < total ? total - used : 0);
  if (total_b) *total_b = (size_t)total;
  return CUDA_SUCCESS;
}

/* Every gated call: launches queue a kernel; copies run after queued work (synchronous
 * copies wait for it, as the real driver's do). */
#define X(name, params, args)                                                     \
  EXPORT CUresult name params {                                                   \
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;                          \
    if (strncmp(#name, "cuLaunch", 8) == 0 || strncmp(#name, "cuGraph", 7) == 0)  \
      enqueue(kernel_ns());                                                       \
    else if (strstr(#name, "Async") == NULL) drain();                             \
    log_call(#name, "%s", "");                                                    \
    return CUDA_SUCCESS;                                                          \
  }
GPUMOSAIC_GATED_CALLS(X)
#undef X

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags, int *status);

struct entry { const char *name; void *fn; };
static const struct entry table[] = {
#define X(name, params, args) {#name, (void *)name},
    GPUMOSAIC_GATED_CALLS(X)
#undef X
    {"cuInit", (void *)cuInit},
    {"cuCtxGetCurrent", (void *)cuCtxGetCurrent},
    {"cuCtxSetCurrent", (void *)cuCtxSetCurrent},
    {"cuCtxSynchronize", (void *)cuCtxSynchronize},
    {"cuMemAlloc_v2", (void *)cuMemAlloc_v2},
    {"cuMemAllocManaged", (void *)cuMemAllocManaged},
    {"cuMemFree_v2", (void *)cuMemFree_v2},
    {"cuMemGetInfo_v2", (void *)cuMemGetInfo_v2},
    {"cuGetProcAddress_v2", (void *)cuGetProcAddress_v2},
    {NULL, NULL},
};

static void *lookup(const char *name) {
  for (int i = 0; table[i].name; i++)
    if (strcmp(table[i].name, name) == 0) return table[i].fn;
  return NULL;
}

/* As the driver does: the base name plus the newest ABI suffix, and the per-thread
 * default-stream flavour when asked for. */
static CUresult get_proc(const char *symbol, void **pfn, cuuint64_t flags) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  const char *ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
                         ? (strstr(symbol, "Async") || strstr(symbol, "Launch") ? "_ptsz" : "_ptds")
                         : "";
  char name[128];
  static const char *versions[] = {"_v2", "", NULL};
  *pfn = NULL;
  for (int v = 0; versions[v] && !*pfn; v++) {
    snprintf(name, sizeof name, "%s%s%s", symbol, versions[v], ptds);
    *pfn = lookup(name);
    if (!*pfn && *ptds) {
      snprintf(name, sizeof name, "%s%s", symbol, versions[v]);
      *pfn = lookup(name);
    }
  }
  log_call("cuGetProcAddress", "symbol=%s found=%d", symbol, *pfn != NULL);
  return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
  (void)version;
  return get_proc(symbol, pfn, flags);
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags, int *status) {
  (void)version;
  CUresult rc = get_proc(symbol, pfn, flags);
  if (status) *status = rc == CUDA_SUCCESS ? 0 : 1;
  return rc;
}
