// Measures the clock a busy core runs at, where no cycle counter is readable (a VM without a PMU;
// /proc/cpuinfo's "cpu MHz" is then only the nominal rate). A chain of dependent integer adds
// retires one add per cycle on every x86-64 core, so adds per second = cycles per second. The
// loop's own counter runs beside the chain, in parallel. Time is this thread's CPU time, so other
// processes sharing the core do not lower the figure. Prints the best of RUNS runs (default 5), in
// MHz.
//   cc -O2 -o clock_probe bench/clock_probe.c && ./clock_probe [RUNS]
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  const int runs = argc > 1 ? atoi(argv[1]) : 5;
  const long iters = 100000000;  // x 16 adds: about 0.4 s at 4 GHz
  double best = 0;
  for (int run = 0; run < runs; ++run) {
    struct timespec t0, t1;
    unsigned long x = 0;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    for (long i = 0; i < iters; ++i) {
      __asm__ volatile(
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          : "+r"(x));
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    const double mhz = 16.0 * (double)iters / s / 1e6;
    if (mhz > best) best = mhz;
    if (x != 16ul * (unsigned long)iters) return 1;
  }
  printf("%.0f\n", best);
  return 0;
}
