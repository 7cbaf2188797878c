// The core's fp32 peak, measured: independent FMAs at each vector width the CPU has, and the
// caches as cpuid describes them (for VMs whose lscpu and sysfs show none).
//
//   cc -O2 -o fma_probe bench/fma_probe.c && taskset -c 0 ./fma_probe [RUNS]
//   ./fma_probe --cpuid
//
// One binary for every x86-64 machine: each width's loop is compiled for its own instruction set
// (a target attribute per function) and only called when cpuid, and the OS's saved register state
// (GCC's __builtin_cpu_supports checks both), say the CPU has it. Widths: 128 bits (FMA3 on xmm;
// SSE mul + add where the CPU has no FMA), 256 bits (FMA3 on ymm), 512 bits (AVX-512F on zmm).
//
// Each loop keeps 12 (16 at 512 bits) accumulators that do not depend on each other: an FMA has a
// latency of 4-5 cycles on Zen 3-5 and Intel cores since Haswell, and with 2 FMA pipes 8-10
// chains in flight fill both, so 12 hide the latency with margin. A dependent add chain (one add
// per cycle on every x86-64 core, as bench/clock_probe.c) gives the clock of the same core just
// before: FLOP/cycle = GFLOP/s / GHz. Times are this thread's CPU time, so other processes on the
// core do not lower the figures. Prints the best of RUNS runs (default 5):
//   clock_mhz 3571
//   fma bits=512 isa=AVX-512F chains=16 gflops=228.1 flop_per_cycle=63.9
// and with --cpuid: vendor/family/model and one `cache level=1 type=data size_kib=48 ...` line
// per cache (AMD leaf 0x8000001D, or 0x80000005/6 without topology extensions; Intel leaf 4).
#include <cpuid.h>
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double thread_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// The clock, as bench/clock_probe.c measures it: 16 dependent adds per iteration.
static double clock_mhz(long iters) {
  unsigned long x = 0;
  const double t0 = thread_seconds();
  for (long i = 0; i < iters; ++i) {
    __asm__ volatile(
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        : "+r"(x));
  }
  const double s = thread_seconds() - t0;
  return x == 16ul * (unsigned long)iters ? 16.0 * (double)iters / s / 1e6 : 0;
}

// acc = acc * m + a converges to a / (1 - m) = 1: no overflow, no denormals, whatever the count.
#define MUL 0.999999f
#define ADD 0.000001f
#define R12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define R16(X) R12(X) X(12) X(13) X(14) X(15)

// Each returns the FLOPs done (an FMA lane counts 2) and stores a sum the caller checks, so the
// compiler cannot drop the work.
__attribute__((target("fma"))) static double fma128(long iters, float* sink) {
  const __m128 m = _mm_set1_ps(MUL), a = _mm_set1_ps(ADD);
#define DECL(i) __m128 c##i = _mm_set1_ps((float)(i) / 16);
#define STEP(i) c##i = _mm_fmadd_ps(c##i, m, a);
#define SUM(i) s = _mm_add_ps(s, c##i);
  R12(DECL)
  for (long k = 0; k < iters; ++k) {
    R12(STEP)
    __asm__ volatile("" ::: "memory");
  }
  __m128 s = _mm_setzero_ps();
  R12(SUM)
  *sink = _mm_cvtss_f32(s);
#undef DECL
#undef STEP
#undef SUM
  return 12.0 * 4 * 2 * (double)iters;
}

// No FMA3 (Intel before Haswell, AMD before Piledriver): a multiply then an add per lane, 2 FLOP
// per lane per pair, on the same 12 chains.
static double sse128(long iters, float* sink) {
  const __m128 m = _mm_set1_ps(MUL), a = _mm_set1_ps(ADD);
#define DECL(i) __m128 c##i = _mm_set1_ps((float)(i) / 16);
#define STEP(i) c##i = _mm_add_ps(_mm_mul_ps(c##i, m), a);
#define SUM(i) s = _mm_add_ps(s, c##i);
  R12(DECL)
  for (long k = 0; k < iters; ++k) {
    R12(STEP)
    __asm__ volatile("" ::: "memory");
  }
  __m128 s = _mm_setzero_ps();
  R12(SUM)
  *sink = _mm_cvtss_f32(s);
#undef DECL
#undef STEP
#undef SUM
  return 12.0 * 4 * 2 * (double)iters;
}

__attribute__((target("avx,fma"))) static double fma256(long iters, float* sink) {
  const __m256 m = _mm256_set1_ps(MUL), a = _mm256_set1_ps(ADD);
#define DECL(i) __m256 c##i = _mm256_set1_ps((float)(i) / 16);
#define STEP(i) c##i = _mm256_fmadd_ps(c##i, m, a);
#define SUM(i) s = _mm256_add_ps(s, c##i);
  R12(DECL)
  for (long k = 0; k < iters; ++k) {
    R12(STEP)
    __asm__ volatile("" ::: "memory");
  }
  __m256 s = _mm256_setzero_ps();
  R12(SUM)
  *sink = _mm_cvtss_f32(_mm256_castps256_ps128(s));
#undef DECL
#undef STEP
#undef SUM
  return 12.0 * 8 * 2 * (double)iters;
}

__attribute__((target("avx512f"))) static double fma512(long iters, float* sink) {
  const __m512 m = _mm512_set1_ps(MUL), a = _mm512_set1_ps(ADD);
#define DECL(i) __m512 c##i = _mm512_set1_ps((float)(i) / 16);
#define STEP(i) c##i = _mm512_fmadd_ps(c##i, m, a);
#define SUM(i) s = _mm512_add_ps(s, c##i);
  R16(DECL)
  for (long k = 0; k < iters; ++k) {
    R16(STEP)
    __asm__ volatile("" ::: "memory");
  }
  __m512 s = _mm512_setzero_ps();
  R16(SUM)
  *sink = _mm512_reduce_add_ps(s);
#undef DECL
#undef STEP
#undef SUM
  return 16.0 * 16 * 2 * (double)iters;
}

struct width {
  int bits;
  const char* isa;
  int chains;
  double (*run)(long, float*);
};

// Best GFLOP/s of `runs` runs of about 0.1 s each (the iteration count is calibrated first).
static double best_gflops(const struct width* w, int runs) {
  float sink = 0;
  long iters = 1 << 16;
  for (;;) {  // calibrate: double until a run takes 20 ms
    const double t0 = thread_seconds();
    w->run(iters, &sink);
    if (thread_seconds() - t0 > 0.02 || iters > (1l << 40)) break;
    iters *= 2;
  }
  iters *= 5;
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    const double t0 = thread_seconds();
    const double flop = w->run(iters, &sink);
    const double g = flop / (thread_seconds() - t0) / 1e9;
    if (g > best) best = g;
  }
  if (!(sink > 0 && sink < 1e6)) return 0;  // the accumulators must have stayed near 1
  return best;
}

static int print_cpuid(void);

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--cpuid") == 0) return print_cpuid();
  const int runs = argc > 1 ? atoi(argv[1]) : 5;
  if (runs < 1) {
    fprintf(stderr, "fma_probe: expected RUNS >= 1 or --cpuid, got '%s'\n", argv[1]);
    return 2;
  }
  __builtin_cpu_init();
  struct width widths[3];
  int n = 0;
  if (__builtin_cpu_supports("fma"))
    widths[n++] = (struct width){128, "FMA", 12, fma128};
  else
    widths[n++] = (struct width){128, "SSE", 12, sse128};  // mul + add
  if (__builtin_cpu_supports("fma") && __builtin_cpu_supports("avx"))
    widths[n++] = (struct width){256, "FMA", 12, fma256};
  if (__builtin_cpu_supports("avx512f")) widths[n++] = (struct width){512, "AVX-512F", 16, fma512};
  double mhz = 0;
  for (int r = 0; r < runs; ++r) {
    const double m = clock_mhz(10000000);  // x 16 adds: about 40 ms at 4 GHz
    if (m > mhz) mhz = m;
  }
  printf("clock_mhz %.0f\n", mhz);
  for (int i = 0; i < n; ++i) {
    const double g = best_gflops(&widths[i], runs);
    if (g <= 0) {
      fprintf(stderr, "fma_probe: the %d-bit loop's accumulators left their range\n",
              widths[i].bits);
      return 1;
    }
    printf("fma bits=%d isa=%s chains=%d gflops=%.1f flop_per_cycle=%.1f\n", widths[i].bits,
           widths[i].isa, widths[i].chains, g, mhz > 0 ? g / (mhz / 1000) : 0);
  }
  return 0;
}

// ---- cpuid: vendor, family, model, caches ------------------------------------------------------

// ways 0: not given by the leaf; shared_by 0: not given (the threads sharing the cache).
static void cache_line(int level, const char* type, unsigned kib, unsigned ways, unsigned line,
                       unsigned sharing, unsigned leaf) {
  printf("cache level=%d type=%s size_kib=%u ways=%u line=%u shared_by=%u leaf=0x%x\n", level, type,
         kib, ways, line, sharing, leaf);
}

// Deterministic cache parameters (AMD leaf 0x8000001D, Intel leaf 4: the same layout).
static int deterministic_caches(unsigned leaf) {
  int found = 0;
  for (unsigned i = 0; i < 16; ++i) {
    unsigned a, b, c, d;
    __cpuid_count(leaf, i, a, b, c, d);
    const unsigned t = a & 31;
    if (t == 0) break;
    const unsigned ways = (b >> 22) + 1, parts = ((b >> 12) & 1023) + 1, line = (b & 4095) + 1;
    const unsigned sets = c + 1;
    const unsigned long bytes = (unsigned long)ways * parts * line * sets;
    static const char* types[] = {"none", "data", "instruction", "unified"};
    cache_line((int)((a >> 5) & 7), t < 4 ? types[t] : "other", (unsigned)(bytes >> 10), ways, line,
               ((a >> 14) & 4095) + 1, leaf);
    ++found;
  }
  return found;
}

static int print_cpuid(void) {
  unsigned a, b, c, d;
  char vendor[13] = {0};
  __cpuid(0, a, b, c, d);
  const unsigned max_leaf = a;
  memcpy(vendor, &b, 4);
  memcpy(vendor + 4, &d, 4);
  memcpy(vendor + 8, &c, 4);
  __cpuid(1, a, b, c, d);
  // Family and model as /proc/cpuinfo shows them: extended fields added where the base is 0xF
  // (family) or 0x6/0xF (model).
  unsigned family = (a >> 8) & 15, model = (a >> 4) & 15;
  if (family == 15) family += (a >> 20) & 255;
  if (family >= 6) model += ((a >> 16) & 15) << 4;
  printf("vendor %s\nfamily %u\nmodel %u\n", vendor, family, model);
  __cpuid(0x80000000, a, b, c, d);
  const unsigned max_ext = a;
  int found = 0;
  if (strcmp(vendor, "AuthenticAMD") == 0 || strcmp(vendor, "HygonGenuine") == 0) {
    __cpuid(0x80000001, a, b, c, d);
    const int topoext = (c >> 22) & 1;
    if (topoext && max_ext >= 0x8000001D) found = deterministic_caches(0x8000001D);
    // The legacy leaves (a VM may zero 0x8000001D, as this project's Zen 5 KVM guest does):
    // per-core L1 and L2 sizes; L3 in 512 KiB units, for the whole package on some EPYCs.
    if (!found && max_ext >= 0x80000006) {
      __cpuid(0x80000005, a, b, c, d);
      cache_line(1, "data", c >> 24, (c >> 16) & 255, c & 255, 1, 0x80000005);
      cache_line(1, "instruction", d >> 24, (d >> 16) & 255, d & 255, 1, 0x80000005);
      __cpuid(0x80000006, a, b, c, d);
      if (c >> 16) cache_line(2, "unified", c >> 16, 0, c & 255, 1, 0x80000006);
      if (d >> 18) cache_line(3, "unified", (d >> 18) * 512, 0, d & 255, 0, 0x80000006);
    }
  } else if (max_leaf >= 4) {
    deterministic_caches(4);
  }
  return 0;
}
