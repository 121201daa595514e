/* gpumosaic share: the LD_PRELOAD interposer that lets several processes time-share one
 * GPU (in the spirit of grgalex/nvshare, written from its documented behaviour).
 *
 * - cuMemAlloc becomes cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL), so every process may use
 *   the whole GPU memory and the driver pages on demand;
 * - cuLaunchKernel and every cuMemcpy* variant wait until this process holds the GPU
 *   lock that the daemon (gpumosaic share daemon) grants first-come-first-served for a
 *   time quantum; on DROP_LOCK the process blocks new work, synchronizes its context and
 *   answers LOCK_RELEASED; an idle holder releases early; kernel launches are paced so
 *   that a drop drains quickly; a holder whose drop took longer than TQ + grace gets
 *   LOCK_REVOKED from the daemon and from then on waits like any other client (new
 *   gated calls block until it holds the lock again);
 * - the hooks are reached by symbol interposition, through dlsym (ctypes, frameworks that
 *   dlopen libcuda) and through cuGetProcAddress / cuGetProcAddress_v2 (CUDA 12 runtimes).
 *
 * Wire format: one ASCII line per message, "TYPE key=value ...\n" (docs/share.md).
 * Environment: GPUMOSAIC_SHARE_SOCKET (the GPU's daemon socket; unset = pass-through),
 * GPUMOSAIC_SHARE_LIBCUDA (default libcuda.so.1), GPUMOSAIC_SHARE_IDLE_S (early release,
 * default 5), GPUMOSAIC_SHARE_RECONNECT_S (default 30), GPUMOSAIC_SHARE_RESERVE_MIB
 * (default 1536), GPUMOSAIC_SHARE_SINGLE_OVERSUB=1, GPUMOSAIC_SHARE_DEBUG=1.
 *
 * Memory cap (as HAMi does; the service sets it for `--sharing nvshare:mem_cap=...`):
 * GPUMOSAIC_SHARE_MEM_CAP_MIB (an explicit cap) or GPUMOSAIC_SHARE_MEM_CAP_MILLI (the
 * job's share of the GPU's memory, in thousandths of the driver's total; the MiB wins
 * when both are set). With a cap, cuMemGetInfo reports the cap as the total and the cap
 * less this process's allocations as free, and an allocation that would take the process
 * over the cap fails with CUDA_ERROR_OUT_OF_MEMORY before the driver is asked. The cap
 * holds with or without a daemon socket. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cuda_api.h"

#define EXPORT __attribute__((visibility("default")))
#define MIB (1024ULL * 1024ULL)

/* ---- the table of hooked symbols -------------------------------------------------- */

enum {
#define X(name, params, args) IDX_##name,
  GPUMOSAIC_GATED_CALLS(X)
#undef X
  IDX_cuInit,
  IDX_cuMemAlloc_v2,
  IDX_cuMemAllocManaged,
  IDX_cuMemFree_v2,
  IDX_cuMemGetInfo_v2,
  IDX_cuGetProcAddress,
  IDX_cuGetProcAddress_v2,
  N_HOOKS
};

static const char *const hook_names[N_HOOKS] = {
#define X(name, params, args) #name,
    GPUMOSAIC_GATED_CALLS(X)
#undef X
    "cuInit", "cuMemAlloc_v2", "cuMemAllocManaged", "cuMemFree_v2", "cuMemGetInfo_v2",
    "cuGetProcAddress", "cuGetProcAddress_v2",
};

static void *real_fn[N_HOOKS];
static void *hook_fn[N_HOOKS];

typedef CUresult (*ctx_sync_fn)(void);
typedef CUresult (*ctx_get_fn)(CUcontext *);
typedef CUresult (*ctx_set_fn)(CUcontext);
static ctx_sync_fn real_ctx_sync;
static ctx_get_fn real_ctx_get;
static ctx_set_fn real_ctx_set;

static void *(*real_dlsym)(void *, const char *);
static void *libcuda;

/* ---- client state (one owner: this file; guarded by mu) --------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t send_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t boot_once = PTHREAD_ONCE_INIT;

/* Flags read on the fast path without the mutex are _Atomic (sequentially consistent):
 * a gated call increments `inflight` then reads `draining`, a drop sets `draining` then
 * reads `inflight`, so one of the two always sees the other. */
static int enabled;     /* a socket was given: gate work (set once, before any call) */
static _Atomic int failed; /* daemon absent or gone for good: gated calls fail */
static _Atomic int connected;
static int sock = -1;
static _Atomic int sched_on = 1; /* anti-thrashing on: work needs the lock */
static _Atomic int own_lock;
static int req_pending;
static _Atomic int draining;
static _Atomic int inflight;
static _Atomic unsigned long work_seq; /* gated calls so far: the idle check compares it */
static unsigned long grant_seq;          /* LOCK_OKs so far (guarded by mu): a park compares it */
static _Atomic(CUcontext) saved_ctx; /* the application's context, for the client thread */
static int debug;
static double idle_s = 5.0, reconnect_s = 30.0;
static unsigned long long reserve_bytes = 1536 * MIB;
static int single_oversub;
static char sock_path[108];

static unsigned long long own_bytes, gpu_total_bytes;
static unsigned long long cap_mib_bytes; /* GPUMOSAIC_SHARE_MEM_CAP_MIB; 0: none */
static unsigned cap_milli;               /* GPUMOSAIC_SHARE_MEM_CAP_MILLI; 0: none */
static _Atomic int pacing_pending, pacing_window = 1;

struct alloc { CUdeviceptr ptr; size_t size; };
static struct alloc *allocs;
static size_t n_allocs, cap_allocs;

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("gpumosaic-share: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

#define DEBUG(...) do { if (debug) say(__VA_ARGS__); } while (0)

/* ---- resolving the real driver ----------------------------------------------------- */

static void resolve_real_dlsym(void) {
  static const char *versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0", NULL};
  for (int i = 0; !real_dlsym && versions[i]; i++)
    real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", versions[i]);
}

static void resolve_driver(void) {
  resolve_real_dlsym();
  if (libcuda || !real_dlsym) return;
  const char *name = getenv("GPUMOSAIC_SHARE_LIBCUDA");
  libcuda = dlopen(name && *name ? name : "libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!libcuda) {
    say("cannot load the CUDA driver (%s): %s", name && *name ? name : "libcuda.so.1", dlerror());
    return;
  }
  for (int i = 0; i < N_HOOKS; i++) real_fn[i] = real_dlsym(libcuda, hook_names[i]);
  real_ctx_sync = (ctx_sync_fn)real_dlsym(libcuda, "cuCtxSynchronize");
  real_ctx_get = (ctx_get_fn)real_dlsym(libcuda, "cuCtxGetCurrent");
  real_ctx_set = (ctx_set_fn)real_dlsym(libcuda, "cuCtxSetCurrent");
}

static void *real(int idx) {
  if (!libcuda) resolve_driver();
  return real_fn[idx];
}

/* ---- messages ------------------------------------------------------------------------ */

static int send_line(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0 || n >= (int)sizeof buf - 1) return -1;
  buf[n++] = '\n';
  pthread_mutex_lock(&send_mu);
  int rc = 0, fd = sock;
  for (int off = 0; off < n && rc == 0;) {
    ssize_t w = fd < 0 ? -1 : send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) rc = -1; else off += (int)w;
  }
  pthread_mutex_unlock(&send_mu);
  return rc;
}

static char rbuf[4096];
static size_t rlen;

/* One line from the socket into out (without the newline); timeout_ms < 0 blocks.
 * Returns 1 for a line, 0 on timeout, -1 when the connection is gone. */
static int read_line(char *out, size_t cap, int timeout_ms) {
  for (;;) {
    char *nl = memchr(rbuf, '\n', rlen);
    if (nl) {
      size_t len = (size_t)(nl - rbuf);
      size_t copy = len < cap - 1 ? len : cap - 1;
      memcpy(out, rbuf, copy);
      out[copy] = 0;
      memmove(rbuf, nl + 1, rlen - len - 1);
      rlen -= len + 1;
      return 1;
    }
    if (rlen == sizeof rbuf) rlen = 0; /* an over-long line: drop it */
    struct pollfd p = {.fd = sock, .events = POLLIN};
    int r = poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return 0;
    if (r < 0) return -1;
    ssize_t got = recv(sock, rbuf + rlen, sizeof rbuf - rlen, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    rlen += (size_t)got;
  }
}

static int is_msg(const char *line, const char *type) {
  size_t n = strlen(type);
  return strncmp(line, type, n) == 0 && (line[n] == 0 || line[n] == ' ');
}

static void client_name(char *out, size_t cap) {
  const char *env = getenv("GPUMOSAIC_SHARE_NAME");
  if (!(env && *env) && getenv("KUBERNETES_SERVICE_HOST")) env = getenv("HOSTNAME");
  if (env && *env) {
    snprintf(out, cap, "%s", env);
  } else {
    FILE *f = fopen("/proc/self/comm", "r");
    if (!f || !fgets(out, (int)cap, f)) snprintf(out, cap, "pid%d", (int)getpid());
    if (f) fclose(f);
  }
  for (char *c = out; *c; c++)
    if (*c == ' ' || *c == '\n' || *c == '=' || *c == '\t') *c = *c == '\n' ? 0 : '_';
}

/* Whether the socket's directory can be trusted (the rule of sockets.check_ancestors and
 * client.check_trusted on the Python side): the directory itself is a directory (not a
 * link) writable by nobody but its owner, and every directory above it, up to / or to a
 * private directory of this user (mode 0700 or stricter), is owned by root, this user or
 * the socket directory's owner and writable by nobody else (a root-owned sticky directory
 * like /tmp excepted): the owner of any directory on the way could rename the socket
 * directory and put its own, with its own socket, in its place. Links are followed first
 * (the resolved path is what the kernel walks). 1: trusted, or nothing there (the connect
 * then says "no share daemon"); 0: refused, why says why. */
static int socket_dir_trusted(char *why, size_t cap) {
  char dir[PATH_MAX], real[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", sock_path);
  char *slash = strrchr(dir, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == dir) dir[1] = 0;
  else *slash = 0;
  struct stat st;
  if (lstat(dir, &st) != 0) return 1;
  if (!S_ISDIR(st.st_mode)) {
    snprintf(why, cap, "socket dir %s is not a directory (a link or a file)", dir);
    return 0;
  }
  if (st.st_mode & 022) {
    snprintf(why, cap, "socket dir %s is writable by group or others (mode %o)", dir,
             (unsigned)(st.st_mode & 07777));
    return 0;
  }
  uid_t me = geteuid(), owner = st.st_uid;
  if (!realpath(dir, real)) {
    snprintf(why, cap, "cannot resolve the socket dir %s: %s", dir, strerror(errno));
    return 0;
  }
  while (strcmp(real, "/") != 0) {
    char *cut = strrchr(real, '/');
    if (!cut) break;
    if (cut == real) real[1] = 0;
    else *cut = 0;
    if (stat(real, &st) != 0) {
      snprintf(why, cap, "cannot check %s above the socket dir %s: %s", real, dir,
               strerror(errno));
      return 0;
    }
    if (st.st_uid != 0 && st.st_uid != me && st.st_uid != owner) {
      snprintf(why, cap,
               "%s (above the socket dir %s) belongs to uid %u: its owner could swap in a "
               "socket of its own",
               real, dir, (unsigned)st.st_uid);
      return 0;
    }
    int sticky_root = st.st_uid == 0 && (st.st_mode & S_ISVTX);
    if ((st.st_mode & 022) && !sticky_root) {
      snprintf(why, cap, "%s (above the socket dir %s) is writable by group or others (mode %o)",
               real, dir, (unsigned)(st.st_mode & 07777));
      return 0;
    }
    if (st.st_uid == me && me != 0 && !(st.st_mode & 077)) break; /* private: nobody below */
  }
  return 1;
}

/* Connect and REGISTER; the reply says whether work is gated. Caller holds no lock. */
static int connect_and_register(void) {
  char why[PATH_MAX + 256];
  if (!socket_dir_trusted(why, sizeof why)) {
    static _Atomic int told; /* once: the reconnect loop would say it again and again */
    if (!told++) say("not trusting the share daemon at %s: %s", sock_path, why);
    return -1;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock_path);
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
    close(fd);
    return -1;
  }
  pthread_mutex_lock(&send_mu);
  sock = fd;
  rlen = 0;
  pthread_mutex_unlock(&send_mu);
  char name[64];
  client_name(name, sizeof name);
  if (send_line("REGISTER pid=%d name=%s", (int)getpid(), name) < 0) return -1;
  char line[256];
  if (read_line(line, sizeof line, 5000) != 1) return -1;
  int on;
  if (is_msg(line, "SCHED_ON")) on = 1;
  else if (is_msg(line, "SCHED_OFF")) on = 0;
  else return -1;
  pthread_mutex_lock(&mu);
  connected = 1;
  sched_on = on;
  own_lock = req_pending = draining = 0;
  unsigned long long bytes = own_bytes, total = gpu_total_bytes;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  if (total) send_line("MEM bytes=%llu total=%llu", bytes, total);
  DEBUG("registered at %s (%s)", sock_path, line);
  return 0;
}

/* ---- the device ------------------------------------------------------------------------ */

static CUresult sync_device(void) {
  if (!real_ctx_sync) return CUDA_ERROR_NOT_INITIALIZED;
  if (saved_ctx && real_ctx_set) real_ctx_set(saved_ctx); /* this thread may have no context */
  return real_ctx_sync();
}

/* DROP_LOCK: block new work, let in-flight calls return, synchronize, answer. */
static void drop_lock(void) {
  pthread_mutex_lock(&mu);
  if (!own_lock) {
    pthread_mutex_unlock(&mu);
    send_line("LOCK_RELEASED");
    return;
  }
  draining = 1;
  while (inflight > 0) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  sync_device();
  pthread_mutex_lock(&mu);
  own_lock = draining = req_pending = 0;
  pacing_pending = 0;
  send_line("LOCK_RELEASED");
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  DEBUG("dropped the lock");
}

/* Early release: holding, nothing submitted for idle_s, and the device idle. The client
 * thread samples work_seq every idle_s/4 and remembers when it last changed. */
static unsigned long idle_seq;
static long long idle_since_ns;

static void idle_check(void) {
  unsigned long seq = work_seq;
  long long now = now_ns();
  if (seq != idle_seq || !own_lock) {
    idle_seq = seq;
    idle_since_ns = now;
    return;
  }
  if (!(connected && sched_on && !draining && inflight == 0) ||
      now - idle_since_ns < (long long)(idle_s * 1e9))
    return;
  long long t0 = now_ns();
  sync_device();
  if (now_ns() - t0 >= 100000000LL) return; /* still busy: keep the lock */
  pthread_mutex_lock(&mu);
  draining = 1; /* hold off new work while we decide */
  if (own_lock && inflight == 0 && work_seq == seq) {
    own_lock = 0;
    send_line("LOCK_RELEASED");
    DEBUG("released early (idle)");
  }
  draining = 0;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

/* Park: the application is about to wait for something other than the GPU (a lease
 * waiting for its scheduler's round decision, gpumosaic.lease): release a held lock now,
 * as the early release would after idle_s, so the other processes of this GPU use it
 * meanwhile; the next gated call asks again, at the back of the line. The same steps as
 * a drop: block new work, let the calls in flight return, synchronize, LOCK_RELEASED
 * (unasked, which the daemon takes as an early release). Called by the application
 * (ctypes finds it once the interposer is preloaded); any thread. Returns 1 if a lock
 * was released, 0 if there was none to release (not sharing, not serialized, not
 * holding, the daemon away, or a DROP_LOCK or revocation took it meanwhile). */
EXPORT int gpumosaic_share_park(void) {
  if (!enabled || failed) return 0;
  pthread_mutex_lock(&mu);
  if (!(connected && sched_on && own_lock && !draining)) {
    pthread_mutex_unlock(&mu);
    return 0;
  }
  unsigned long grant = grant_seq;
  draining = 1;
  while (inflight > 0) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  sync_device();
  pthread_mutex_lock(&mu);
  int released = 0;
  /* A DROP_LOCK handled meanwhile already released (and may have let a new grant in):
   * release only the grant this park began with. */
  if (own_lock && grant_seq == grant && connected) {
    own_lock = req_pending = 0;
    pacing_pending = 0;
    send_line("LOCK_RELEASED");
    released = 1;
  }
  draining = 0;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  if (released) DEBUG("parked: released the lock");
  return released;
}

static void lost_daemon(void) {
  pthread_mutex_lock(&mu);
  connected = own_lock = req_pending = draining = 0;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  pthread_mutex_lock(&send_mu);
  if (sock >= 0) close(sock);
  sock = -1;
  pthread_mutex_unlock(&send_mu);
  long long deadline = now_ns() + (long long)(reconnect_s * 1e9);
  while (now_ns() < deadline) {
    if (connect_and_register() == 0) {
      say("reconnected to the daemon at %s", sock_path);
      return;
    }
    pthread_mutex_lock(&send_mu);
    if (sock >= 0) close(sock);
    sock = -1;
    pthread_mutex_unlock(&send_mu);
    usleep(200000);
  }
  say("the daemon at %s is gone and did not come back within %.0f s; GPU calls now fail",
      sock_path, reconnect_s);
  pthread_mutex_lock(&mu);
  failed = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static void *client_thread(void *arg) {
  (void)arg;
  long long next_idle = now_ns();
  char line[256];
  for (;;) {
    int r = read_line(line, sizeof line, 100);
    if (r < 0) {
      lost_daemon();
      if (failed) return NULL;
      continue;
    }
    if (r == 1) {
      DEBUG("got %s", line);
      if (is_msg(line, "LOCK_OK")) {
        pthread_mutex_lock(&mu);
        own_lock = 1;
        grant_seq++;
        req_pending = 0;
        idle_since_ns = now_ns(); /* a fresh grant is not idle */
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
      } else if (is_msg(line, "DROP_LOCK")) {
        drop_lock();
      } else if (is_msg(line, "LOCK_REVOKED")) {
        /* The daemon gave the GPU to the next in line: calls already in flight finish,
         * new ones wait (and ask again) until LOCK_OK. */
        pthread_mutex_lock(&mu);
        own_lock = req_pending = 0;
        pacing_pending = 0;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        static int told;
        if (!told++)
          say("the daemon took the GPU back: this process did not release it within TQ + "
              "grace of being asked (said once); its next GPU calls wait for their turn");
      } else if (is_msg(line, "SCHED_ON") || is_msg(line, "SCHED_OFF")) {
        pthread_mutex_lock(&mu);
        sched_on = is_msg(line, "SCHED_ON");
        own_lock = req_pending = draining = 0;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
      }
    }
    if (now_ns() >= next_idle) {
      idle_check();
      next_idle = now_ns() + (long long)(idle_s * 1e9 / 4);
    }
  }
}

static void child_after_fork(void) {
  /* A forked child shares the parent's connection but not its thread: run unshared. */
  enabled = 0;
  sock = -1;
}

static double env_double(const char *name, double dflt) {
  const char *v = getenv(name);
  char *end;
  double d = v && *v ? strtod(v, &end) : dflt;
  return v && *v && *end == 0 && d >= 0 ? d : dflt;
}

static void bootstrap(void) {
  resolve_driver();
  debug = getenv("GPUMOSAIC_SHARE_DEBUG") && strcmp(getenv("GPUMOSAIC_SHARE_DEBUG"), "1") == 0;
  idle_s = env_double("GPUMOSAIC_SHARE_IDLE_S", 5.0);
  if (idle_s <= 0) idle_s = 5.0;
  reconnect_s = env_double("GPUMOSAIC_SHARE_RECONNECT_S", 30.0);
  reserve_bytes = (unsigned long long)(env_double("GPUMOSAIC_SHARE_RESERVE_MIB", 1536) * MIB);
  cap_mib_bytes = (unsigned long long)(env_double("GPUMOSAIC_SHARE_MEM_CAP_MIB", 0) * MIB);
  double milli = env_double("GPUMOSAIC_SHARE_MEM_CAP_MILLI", 0);
  cap_milli = milli > 1000 ? 1000 : (unsigned)milli;
  single_oversub = getenv("GPUMOSAIC_SHARE_SINGLE_OVERSUB") &&
                   strcmp(getenv("GPUMOSAIC_SHARE_SINGLE_OVERSUB"), "1") == 0;
  const char *path = getenv("GPUMOSAIC_SHARE_SOCKET");
  if (!path || !*path) {
    DEBUG("GPUMOSAIC_SHARE_SOCKET is not set: not sharing");
    return;
  }
  snprintf(sock_path, sizeof sock_path, "%s", path);
  enabled = 1;
  pthread_atfork(NULL, NULL, child_after_fork);
  if (connect_and_register() < 0) {
    say("no share daemon at %s (start one with `gpumosaic share daemon`)", sock_path);
    failed = 1;
    return;
  }
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, client_thread, NULL) != 0) {
    say("cannot start the client thread");
    failed = 1;
  }
  pthread_attr_destroy(&attr);
}

static void boot(void) { pthread_once(&boot_once, bootstrap); }

/* ---- the gate ---------------------------------------------------------------------------- */

static void leave_inflight(void) {
  /* The last call out wakes a drop that waits for the in-flight calls. */
  if (--inflight == 0 && draining) {
    pthread_mutex_lock(&mu);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
  }
}

static CUresult gate_enter(void) {
  boot();
  if (!enabled) return CUDA_SUCCESS;
  for (;;) {
    /* Fast path, no mutex: count ourselves in, then check that we may run. */
    ++inflight;
    if (!failed && (!sched_on || (own_lock && !draining))) break;
    leave_inflight();
    /* Slow path: ask for the lock (once per wait) and sleep until something changes. */
    pthread_mutex_lock(&mu);
    while (!failed && sched_on && !(own_lock && !draining)) {
      if (connected && !own_lock && !req_pending) {
        req_pending = 1;
        send_line("REQ_LOCK");
      }
      pthread_cond_wait(&cv, &mu);
    }
    pthread_mutex_unlock(&mu);
    if (failed) return CUDA_ERROR_UNKNOWN;
  }
  ++work_seq;
  if (!saved_ctx && real_ctx_get) {
    CUcontext ctx = NULL;
    if (real_ctx_get(&ctx) == CUDA_SUCCESS && ctx) saved_ctx = ctx;
  }
  return CUDA_SUCCESS;
}

static void gate_exit(void) {
  if (enabled) leave_inflight();
}

/* After a window of launches, synchronize so that a DROP_LOCK drains quickly: the window
 * doubles while a sync takes < 1 s, halves at >= 1 s and restarts at 1 after >= 10 s. */
static void pace_launch(void) {
  if (!enabled || !sched_on || !real_ctx_sync) return;
  if (++pacing_pending < pacing_window) return;
  long long t0 = now_ns();
  real_ctx_sync();
  double dt = (double)(now_ns() - t0) / 1e9;
  if (dt >= 10.0) pacing_window = 1;
  else if (dt >= 1.0) pacing_window = pacing_window > 1 ? pacing_window / 2 : 1;
  else if (pacing_window < 2048) pacing_window *= 2;
  pacing_pending = 0;
}

/* Launches (not copies) count towards the pacing window; filled in by the constructor. */
static char is_launch[N_HOOKS];

#define X(name, params, args)                                     \
  EXPORT CUresult name params {                                   \
    typedef CUresult(*fn_t) params;                               \
    fn_t real_call = (fn_t)real(IDX_##name);                      \
    if (!real_call) return CUDA_ERROR_NOT_FOUND;                  \
    CUresult gate = gate_enter();                                 \
    if (gate != CUDA_SUCCESS) return gate;                        \
    CUresult rc = real_call args;                                 \
    if (is_launch[IDX_##name]) pace_launch();                    \
    gate_exit();                                                  \
    return rc;                                                    \
  }
GPUMOSAIC_GATED_CALLS(X)
#undef X

/* ---- memory ---------------------------------------------------------------------------- */

static void report_memory(void) {
  pthread_mutex_lock(&mu);
  unsigned long long bytes = own_bytes, total = gpu_total_bytes;
  int up = enabled && connected;
  pthread_mutex_unlock(&mu);
  if (up) send_line("MEM bytes=%llu total=%llu", bytes, total);
}

static void learn_total(void) {
  typedef CUresult (*info_t)(size_t *, size_t *);
  info_t info = (info_t)real(IDX_cuMemGetInfo_v2);
  size_t free_b = 0, total_b = 0;
  if (!gpu_total_bytes && info && info(&free_b, &total_b) == CUDA_SUCCESS) {
    pthread_mutex_lock(&mu);
    gpu_total_bytes = total_b;
    pthread_mutex_unlock(&mu);
  }
}

/* The cap in bytes (0: none), from the driver's total; caller holds mu. */
static unsigned long long cap_bytes_locked(void) {
  if (cap_mib_bytes) return cap_mib_bytes;
  if (cap_milli && gpu_total_bytes) return gpu_total_bytes * cap_milli / 1000ULL; /* < 2^60 */
  return 0;
}

/* `size` bytes already counted in own_bytes (reserved by alloc_managed) are now held. */
static void record_alloc(CUdeviceptr ptr, size_t size) {
  pthread_mutex_lock(&mu);
  if (n_allocs == cap_allocs) {
    size_t cap = cap_allocs ? cap_allocs * 2 : 64;
    struct alloc *grown = realloc(allocs, cap * sizeof *grown);
    if (grown) { allocs = grown; cap_allocs = cap; }
  }
  if (n_allocs < cap_allocs) allocs[n_allocs++] = (struct alloc){ptr, size};
  pthread_mutex_unlock(&mu);
  report_memory();
}

static CUresult alloc_managed(CUdeviceptr *dptr, size_t size, unsigned flags) {
  typedef CUresult (*managed_t)(CUdeviceptr *, size_t, unsigned);
  managed_t managed = (managed_t)real(IDX_cuMemAllocManaged);
  if (!managed) return CUDA_ERROR_NOT_FOUND;
  learn_total();
  pthread_mutex_lock(&mu);
  int over = !single_oversub && gpu_total_bytes && own_bytes + size > gpu_total_bytes;
  unsigned long long cap = cap_bytes_locked();
  if (cap && own_bytes + size > cap) over = 1; /* the job's share of the memory */
  if (!over) own_bytes += size; /* reserved now: concurrent allocations see it */
  pthread_mutex_unlock(&mu);
  if (over) return CUDA_ERROR_OUT_OF_MEMORY; /* one process alone may not oversubscribe */
  CUresult rc = managed(dptr, size, flags);
  if (rc == CUDA_SUCCESS) {
    record_alloc(*dptr, size);
  } else {
    pthread_mutex_lock(&mu);
    own_bytes -= size;
    pthread_mutex_unlock(&mu);
  }
  return rc;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) {
  boot();
  return alloc_managed(dptr, size, CU_MEM_ATTACH_GLOBAL);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned flags) {
  boot();
  return alloc_managed(dptr, size, flags);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
  typedef CUresult (*free_t)(CUdeviceptr);
  free_t f = (free_t)real(IDX_cuMemFree_v2);
  if (!f) return CUDA_ERROR_NOT_FOUND;
  CUresult rc = f(ptr);
  if (rc != CUDA_SUCCESS) return rc;
  int found = 0;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < n_allocs; i++) {
    if (allocs[i].ptr == ptr) {
      own_bytes -= allocs[i].size;
      allocs[i] = allocs[--n_allocs];
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  if (found) report_memory();
  return rc;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b) {
  typedef CUresult (*info_t)(size_t *, size_t *);
  boot(); /* reads the cap */
  info_t f = (info_t)real(IDX_cuMemGetInfo_v2);
  if (!f) return CUDA_ERROR_NOT_FOUND;
  size_t fr = 0, tot = 0;
  CUresult rc = f(&fr, &tot);
  if (rc != CUDA_SUCCESS) return rc;
  /* Every process may use the whole GPU (managed memory): report the GPU less a reserve
   * for contexts and the driver, less what this process holds. */
  unsigned long long usable = tot > reserve_bytes ? tot - reserve_bytes : tot;
  pthread_mutex_lock(&mu);
  if (!gpu_total_bytes) gpu_total_bytes = tot;
  unsigned long long own = own_bytes, cap = cap_bytes_locked();
  pthread_mutex_unlock(&mu);
  if (cap && cap < usable) usable = cap; /* the cap is the job's whole GPU */
  if (total_b) *total_b = (size_t)usable;
  if (free_b) *free_b = (size_t)(usable > own ? usable - own : 0);
  return rc;
}

EXPORT CUresult cuInit(unsigned flags) {
  typedef CUresult (*init_t)(unsigned);
  resolve_driver();
  init_t f = (init_t)real(IDX_cuInit);
  if (!f) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = f(flags);
  if (rc != CUDA_SUCCESS) return rc;
  boot();
  return failed ? CUDA_ERROR_NOT_INITIALIZED : CUDA_SUCCESS;
}

/* ---- lookups: cuGetProcAddress(_v2) and dlsym ----------------------------------------- */

static void init_hook_table(void) {
#define X(name, params, args) hook_fn[IDX_##name] = (void *)name;
  GPUMOSAIC_GATED_CALLS(X)
#undef X
  hook_fn[IDX_cuInit] = (void *)cuInit;
  hook_fn[IDX_cuMemAlloc_v2] = (void *)cuMemAlloc_v2;
  hook_fn[IDX_cuMemAllocManaged] = (void *)cuMemAllocManaged;
  hook_fn[IDX_cuMemFree_v2] = (void *)cuMemFree_v2;
  hook_fn[IDX_cuMemGetInfo_v2] = (void *)cuMemGetInfo_v2;
}

static size_t base_len(const char *name) {
  /* cuMemcpyHtoDAsync_v2_ptsz -> cuMemcpyHtoDAsync: what cuGetProcAddress is asked for. */
  static const char *suffixes[] = {"_ptds", "_ptsz", "_v2", "_v3", NULL};
  size_t n = strlen(name);
  for (int again = 1; again;) {
    again = 0;
    for (int i = 0; suffixes[i]; i++) {
      size_t s = strlen(suffixes[i]);
      if (n > s && strncmp(name + n - s, suffixes[i], s) == 0) { n -= s; again = 1; }
    }
  }
  return n;
}

static int is_ptds(const char *name) {
  return strstr(name, "_ptds") != NULL || strstr(name, "_ptsz") != NULL;
}

/* The driver answered `found` for `symbol`: hand out our hook for that entry point. */
static void *swap_for_hook(const char *symbol, void *found, unsigned long long flags) {
  if (!found) return found;
  for (int i = 0; i < N_HOOKS; i++) {
    if (hook_fn[i] == found) return found; /* already ours (the driver bound to our symbol) */
    if (real_fn[i] == found && hook_fn[i]) return hook_fn[i];
  }
  /* Not one of the exported addresses: match by name and stream flavour. */
  int want_ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  size_t n = strlen(symbol);
  for (int i = 0; i < N_HOOKS; i++) {
    if (!hook_fn[i] || base_len(hook_names[i]) != n || strncmp(hook_names[i], symbol, n) != 0)
      continue;
    if (is_ptds(hook_names[i]) != want_ptds) continue;
    real_fn[i] = found;
    return hook_fn[i];
  }
  return found;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                                 cuuint64_t flags) {
  typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t);
  gpa_t f = (gpa_t)real(IDX_cuGetProcAddress);
  if (!f) return CUDA_ERROR_NOT_FOUND;
  CUresult rc = f(symbol, pfn, version, flags);
  if (rc == CUDA_SUCCESS && pfn && symbol) *pfn = swap_for_hook(symbol, *pfn, flags);
  return rc;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags, int *status) {
  typedef CUresult (*gpa2_t)(const char *, void **, int, cuuint64_t, int *);
  gpa2_t f = (gpa2_t)real(IDX_cuGetProcAddress_v2);
  if (!f) return CUDA_ERROR_NOT_FOUND;
  CUresult rc = f(symbol, pfn, version, flags, status);
  if (rc == CUDA_SUCCESS && pfn && symbol) *pfn = swap_for_hook(symbol, *pfn, flags);
  return rc;
}

EXPORT void *dlsym(void *handle, const char *symbol) {
  resolve_real_dlsym();
  if (!real_dlsym) return NULL;
  if (symbol[0] == 'c' && symbol[1] == 'u') {
    for (int i = 0; i < N_HOOKS; i++) {
      if (strcmp(symbol, hook_names[i]) == 0) {
        resolve_driver();
        if (real_fn[i]) return hook_fn[i];
        break;
      }
    }
  }
  return real_dlsym(handle, symbol);
}

__attribute__((constructor)) static void gpumosaic_share_init(void) {
  init_hook_table();
  for (int i = 0; i < N_HOOKS; i++)
    is_launch[i] = strncmp(hook_names[i], "cuLaunch", 8) == 0 ||
                   strncmp(hook_names[i], "cuGraphLaunch", 13) == 0;
  hook_fn[IDX_cuGetProcAddress] = (void *)cuGetProcAddress;
  hook_fn[IDX_cuGetProcAddress_v2] = (void *)cuGetProcAddress_v2;
}
