/* Call-heavy loop for bench_share.py: N calls of a gated entry point (cuMemcpyDtoD_v2,
 * a zero-byte copy) resolved with dlsym, as frameworks do. Prints ns per call. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*init_t)(unsigned);
typedef int (*copy_t)(unsigned long long, unsigned long long, size_t);

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  init_t init = (init_t)dlsym(cuda, "cuInit");
  copy_t copy = (copy_t)dlsym(cuda, "cuMemcpyDtoDAsync_v2");
  if (!init || !copy || init(0) != 0) { fprintf(stderr, "cuInit failed\n"); return 1; }
  copy(0, 0, 0); /* warm-up: the first gated call may wait for the lock */
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++)
    if (copy(0, 0, 0) != 0) { fprintf(stderr, "call failed\n"); return 1; }
  clock_gettime(CLOCK_MONOTONIC, &b);
  double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (double)n;
  printf("%.1f\n", ns);
  return 0;
}
