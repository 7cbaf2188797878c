// Vectorized sigmoid and tanh (see vec_math.h). GCC/Clang vector extensions hold 8 floats, which
// the compiler lowers to one AVX2 register, two SSE ones, or half an AVX-512 one; the math is the
// same on each, and every element goes through it the same way.
//
// exp(x), x within [-88, 88]: x = n ln2 + r with n = round(x / ln2) (the float rounding trick:
// adding 1.5 * 2^23 leaves n in the low mantissa bits) and |r| <= ln2 / 2, r computed in two
// steps (Cody and Waite: ln2 split into a part exact in float and the rest); exp(r) is Cephes's
// degree-5 minimax polynomial, and 2^n is built in the exponent field (n = -127 makes it 0, so
// exp(x) below -87.7 is 0: only the sigmoid's 1 + exp(-x) sees it, where it cannot matter).
// sigmoid(x) = 1 / (1 + exp(-x)). tanh: Cephes's odd polynomial for |x| < 0.625, else
// 1 - 2 / (exp(2|x|) + 1), with the sign put back. Clamps and selects are bit blends with
// compare masks, and a compare with NaN is false, so NaN flows through to the result.
#include "kernels/vec_math.h"

#include <cmath>
#include <cstring>

namespace nnfleet {
namespace {

typedef float V __attribute__((vector_size(32)));
typedef int32_t VI __attribute__((vector_size(32)));
constexpr int64_t kLanes = 8;

constexpr float kExpMax = 88.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kTanhSmall = 0.625f;

// dst = m ? src : dst, lane by lane (m is all ones or all zeros per lane).
inline void blend(V& dst, const VI& m, const V& src) {
  VI d, s;
  std::memcpy(&d, &dst, sizeof d);
  std::memcpy(&s, &src, sizeof s);
  d = (d & ~m) | (s & m);
  std::memcpy(&dst, &d, sizeof dst);
}

inline void clamp(V& x, float lo, float hi) {
  const V vlo = V{} + lo, vhi = V{} + hi;
  blend(x, x < vlo, vlo);
  blend(x, x > vhi, vhi);
}

// x = exp(x) in place, for x within [-kExpMax, kExpMax] (or NaN).
inline void exp_in_range(V& x) {
  const V t = x * kLog2e + kRound;
  VI n;
  std::memcpy(&n, &t, sizeof n);
  n -= 0x4B400000;  // the bits of kRound: leaves round(x / ln2)
  const V nf = t - kRound;
  V r = x - nf * kLn2Hi;
  r = r - nf * kLn2Lo;
  V p = 1.9875691500e-4f * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const V y = p * r * r + r + 1.0f;
  const VI e = (n + 127) << 23;
  V scale;
  std::memcpy(&scale, &e, sizeof scale);
  x = y * scale;
}

inline void sigmoid_lanes(V& x) {
  V e = -x;
  clamp(e, -kExpMax, kExpMax);
  exp_in_range(e);
  x = 1.0f / (e + 1.0f);
}

inline void tanh_lanes(V& x) {
  VI bits;
  std::memcpy(&bits, &x, sizeof bits);
  const VI sign = bits & static_cast<int32_t>(0x80000000u);
  const VI abs_bits = bits & 0x7FFFFFFF;
  V a;
  std::memcpy(&a, &abs_bits, sizeof a);
  const V z = a * a;
  V p = -5.70498872745e-3f * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const V small = p * z * a + a;
  V e = a + a;
  clamp(e, 0.0f, kExpMax);
  exp_in_range(e);
  V y = 1.0f - 2.0f / (e + 1.0f);
  blend(y, a < (V{} + kTanhSmall), small);
  VI out;
  std::memcpy(&out, &y, sizeof out);
  out |= sign;
  std::memcpy(&x, &out, sizeof x);
}

// Runs f over x[n] in blocks of kLanes, the last one padded with zeros, writing y[n].
template <typename F>
void for_blocks(int64_t n, const float* x, float* y, F f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    V v;
    std::memcpy(&v, x + i, sizeof v);
    f(v);
    std::memcpy(y + i, &v, sizeof v);
  }
  if (i == n) return;
  const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
  V v = {};
  std::memcpy(&v, x + i, bytes);
  f(v);
  std::memcpy(y + i, &v, bytes);
}

}  // namespace

void sigmoid_forward(int64_t n, const float* x, float* y) {
  for_blocks(n, x, y, [](V& v) { sigmoid_lanes(v); });
}

void tanh_forward(int64_t n, const float* x, float* y) {
  for_blocks(n, x, y, [](V& v) { tanh_lanes(v); });
}

}  // namespace nnfleet
