// Bilinear upsampling by integer factors, TensorFlow's half-pixel resize_bilinear (see resize.h).
#include "kernels/resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace nnfleet {
namespace {

// Where output index o of an axis resized from `in` to `out` samples the input: the two
// neighbours and the weight of the upper one, computed in float exactly as TensorFlow's
// compute_interpolation_weights with its HalfPixelScaler and scale in / out.
struct Tap {
  int lo, hi;
  float lerp;
};
Tap axis_tap(int o, int in, int out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  const float pos = (static_cast<float>(o) + 0.5f) * scale - 0.5f;
  const float base = std::floor(pos);
  return {std::max(static_cast<int>(base), 0), std::min(static_cast<int>(std::ceil(pos)), in - 1),
          pos - base};
}

}  // namespace

ResizeGeom upsample_geom(int h, int w, int c, int sh, int sw) {
  ResizeGeom g;
  g.h = g.ch = h;
  g.w = g.cw = w;
  g.c = c;
  g.oh = h * sh;
  g.ow = w * sw;
  return g;
}

// The window form over the whole image, as a layer calls it with its scratch (same taps, same
// lerp order, so the same bits).
void resize_bilinear_forward(int n, int h, int w, int c, int sh, int sw, const float* x, float* y) {
  resize_forward(ResizeMethod::kBilinear, n, upsample_geom(h, w, c, sh, sw), x, y);
}

// y = (1-yl)((1-xl) tl + xl tr) + yl((1-xl) bl + xl br), so each corner gets its product of
// weights times dy (neighbours that coincide at the border receive both shares).
void resize_bilinear_backward(int n, int h, int w, int c, int sh, int sw, const float* dy,
                              float* dx) {
  const int oh = h * sh, ow = w * sw;
  for (int img = 0; img < n; ++img) {
    float* image = dx + int64_t{img} * h * w * c;
    for (int oy = 0; oy < oh; ++oy) {
      const Tap ty = axis_tap(oy, h, oh);
      for (int ox = 0; ox < ow; ++ox) {
        const Tap tx = axis_tap(ox, w, ow);
        const float* g = dy + ((int64_t{img} * oh + oy) * ow + ox) * c;
        const float wy[2] = {1.0f - ty.lerp, ty.lerp}, wx[2] = {1.0f - tx.lerp, tx.lerp};
        const int ys[2] = {ty.lo, ty.hi}, xs[2] = {tx.lo, tx.hi};
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) {
            float* __restrict d = image + (int64_t{ys[a]} * w + xs[b]) * c;
            const float k = wy[a] * wx[b];
            for (int ch = 0; ch < c; ++ch) d[ch] += k * g[ch];
          }
      }
    }
  }
}

}  // namespace nnfleet

// ---- tf.image.resize's methods over a window, and the projective sampler ----

namespace nnfleet {
namespace {

// TensorFlow's bicubic coefficient table (resize_bicubic_op.cc): entry i holds the Keys kernel
// (a = -0.5) at distance i/1024 (slot 0) and 1 + i/1024 (slot 1), rounded to float.
const std::vector<float>& keys_cubic_table() {
  static const std::vector<float> table = [] {
    constexpr int kTable = 1024;
    constexpr double a = -0.5;
    std::vector<float> t(2 * (kTable + 1));
    for (int i = 0; i <= kTable; ++i) {
      double x = static_cast<float>(i * 1.0 / kTable);
      t[2 * static_cast<size_t>(i)] = static_cast<float>(((a + 2) * x - (a + 3)) * x * x + 1);
      x += 1.0;
      t[2 * static_cast<size_t>(i) + 1] =
          static_cast<float>(((a * x - 5 * a) * x + 8 * a) * x - 4 * a);
    }
    return t;
  }();
  return table;
}

// One axis's taps laid out in a float workspace: off[out + 1] and idx[taps] are ints copied in
// and out bytewise (std::memcpy is the defined way to keep an int in float storage; it compiles to
// a plain load or store), then wt[taps] floats. Output o reads idx/wt[off[o] .. off[o+1]).
static_assert(sizeof(int) == sizeof(float), "an int index takes one float slot of the workspace");
class TapTable {
 public:
  static size_t floats(int out, size_t taps) { return static_cast<size_t>(out) + 1 + 2 * taps; }
  TapTable(float* base, int out, size_t taps)
      : off_(base), idx_(base + out + 1), wt_(idx_ + taps) {}
  int off(int o) const { return get(off_ + o); }
  int idx(int k) const { return get(idx_ + k); }
  float wt(int k) const { return wt_[k]; }
  // Filling: start(), then per output its push()es and end_output().
  void start() { put(off_, n_ = 0); }
  void push(int idx, float wt) {
    put(idx_ + n_, idx);
    wt_[n_++] = wt;
  }
  void end_output(int o) { put(off_ + o + 1, n_); }
  float post = 1.0f;  // a factor applied after the sum (area: the scale in / out)

 private:
  static int get(const float* p) {
    int v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void put(float* p, int v) { std::memcpy(p, &v, sizeof v); }
  float* off_;
  float* idx_;
  float* wt_;
  int n_ = 0;
};

void bicubic_taps(TapTable& t, int o, int in, float scale) {
  const std::vector<float>& table = keys_cubic_table();
  const float pos = (static_cast<float>(o) + 0.5f) * scale - 0.5f;
  const auto base = static_cast<int64_t>(std::floor(pos));
  const float delta = pos - static_cast<float>(base);
  const auto off = static_cast<size_t>(std::lrintf(delta * 1024.0f));
  const float k[4] = {table[off * 2 + 1], table[off * 2], table[(1024 - off) * 2],
                      table[(1024 - off) * 2 + 1]};
  float w[4];
  int idx[4];
  for (int i = 0; i < 4; ++i) {
    const int64_t want = base - 1 + i;
    idx[i] = static_cast<int>(std::clamp<int64_t>(want, 0, in - 1));
    w[i] = idx[i] == want ? k[i] : 0.0f;  // taps outside the image weigh 0
  }
  const float sum = w[0] + w[1] + w[2] + w[3];
  if (std::abs(sum) >= 1000.0f * std::numeric_limits<float>::min()) {
    const float inv = 1.0f / sum;
    for (float& v : w) v *= inv;
  }
  for (int i = 0; i < 4; ++i) t.push(idx[i], w[i]);
}

// The input cells resize_area's box [o * scale, (o + 1) * scale) covers: [start, end).
std::pair<int64_t, int64_t> area_box(int o, float scale) {
  const float b0 = static_cast<float>(o) * scale, b1 = static_cast<float>(o + 1) * scale;
  return {static_cast<int64_t>(std::floor(b0)), static_cast<int64_t>(std::ceil(b1))};
}

// resize_area's weights: the fraction of input cell i inside the box [b0, b1).
void area_taps(TapTable& t, int o, int in, float scale) {
  const float b0 = static_cast<float>(o) * scale, b1 = static_cast<float>(o + 1) * scale;
  const auto [start, end] = area_box(o, scale);
  for (int64_t i = start; i < end; ++i) {
    const auto fi = static_cast<float>(i);
    float w;
    if (fi < b0)
      w = fi + 1 > b1 ? scale : fi + 1 - b0;
    else
      w = fi + 1 > b1 ? b1 - fi : 1.0f;
    t.push(static_cast<int>(std::min<int64_t>(i, in - 1)), w);
  }
}

// How many taps an axis resized from `in` to `out` by `m` has (what fill_taps pushes).
size_t tap_count(ResizeMethod m, int in, int out) {
  const auto o = static_cast<size_t>(out);
  switch (m) {
    case ResizeMethod::kBilinear:
      return 2 * o;
    case ResizeMethod::kNearest:
      return o;
    case ResizeMethod::kBicubic:
      return 4 * o;
    case ResizeMethod::kArea:
      break;
  }
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  size_t taps = 0;
  for (int i = 0; i < out; ++i) {
    const auto [start, end] = area_box(i, scale);
    taps += static_cast<size_t>(std::max<int64_t>(end - start, 0));
  }
  return taps;
}

// Fills `t` (sized by tap_count) with the taps of resize_axis_taps's table.
void fill_taps(ResizeMethod m, int in, int out, TapTable& t) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  t.start();
  for (int o = 0; o < out; ++o) {
    switch (m) {
      case ResizeMethod::kBilinear: {
        const Tap b = axis_tap(o, in, out);
        t.push(b.lo, 1.0f - b.lerp);
        t.push(b.hi, b.lerp);
        break;
      }
      case ResizeMethod::kNearest: {
        const float pos = (static_cast<float>(o) + 0.5f) * scale;
        const auto i = static_cast<int64_t>(std::floor(pos));
        t.push(static_cast<int>(std::clamp<int64_t>(i, 0, in - 1)), 1.0f);
        break;
      }
      case ResizeMethod::kBicubic:
        bicubic_taps(t, o, in, scale);
        break;
      case ResizeMethod::kArea:
        area_taps(t, o, in, scale);
        break;
    }
    t.end_output(o);
  }
  t.post = m == ResizeMethod::kArea ? scale : 1.0f;
}

// The y and x tables of `g`, filled in `work` (resize_work_floats(m, g) floats).
struct Tables {
  TapTable y, x;
};
Tables fill_tables(ResizeMethod m, const ResizeGeom& g, float* work) {
  const size_t ny = tap_count(m, g.ch, g.oh), nx = tap_count(m, g.cw, g.ow);
  Tables t{TapTable(work, g.oh, ny), TapTable(work + TapTable::floats(g.oh, ny), g.ow, nx)};
  fill_taps(m, g.ch, g.oh, t.y);
  fill_taps(m, g.cw, g.ow, t.x);
  return t;
}

}  // namespace

AxisTaps resize_axis_taps(ResizeMethod m, int in, int out) {
  const size_t taps = tap_count(m, in, out);
  std::vector<float> work(TapTable::floats(out, taps));
  TapTable table(work.data(), out, taps);
  fill_taps(m, in, out, table);
  AxisTaps t;
  for (int o = 0; o <= out; ++o) t.off.push_back(table.off(o));
  for (int k = 0; k < static_cast<int>(taps); ++k) {
    t.idx.push_back(table.idx(k));
    t.wt.push_back(table.wt(k));
  }
  t.post = table.post;
  return t;
}

size_t resize_work_floats(ResizeMethod m, const ResizeGeom& g) {
  return TapTable::floats(g.oh, tap_count(m, g.ch, g.oh)) +
         TapTable::floats(g.ow, tap_count(m, g.cw, g.ow));
}

namespace {

// The window's pixel (wy, wx) of image `img`.
inline const float* window_pixel(const ResizeGeom& g, const float* x, int img, int wy, int wx) {
  return x + ((int64_t{img} * g.h + g.y0 + wy) * g.w + g.x0 + wx) * g.c;
}

// Bilinear in TensorFlow's lerp order (resize_bilinear_op.cc's compute_lerp).
void resize_bilinear_window(int n, const ResizeGeom& g, const TapTable& ty, const TapTable& tx,
                            const float* x, float* y) {
  for (int img = 0; img < n; ++img)
    for (int oy = 0; oy < g.oh; ++oy) {
      const int iy[2] = {ty.idx(2 * oy), ty.idx(2 * oy + 1)};
      const float yl = ty.wt(2 * oy + 1);
      for (int ox = 0; ox < g.ow; ++ox) {
        const int ix[2] = {tx.idx(2 * ox), tx.idx(2 * ox + 1)};
        const float xl = tx.wt(2 * ox + 1);
        const float* tl = window_pixel(g, x, img, iy[0], ix[0]);
        const float* tr = window_pixel(g, x, img, iy[0], ix[1]);
        const float* bl = window_pixel(g, x, img, iy[1], ix[0]);
        const float* br = window_pixel(g, x, img, iy[1], ix[1]);
        float* o = y + ((int64_t{img} * g.oh + oy) * g.ow + ox) * g.c;
        for (int ch = 0; ch < g.c; ++ch) {
          const float t = tl[ch] + (tr[ch] - tl[ch]) * xl;
          const float b = bl[ch] + (br[ch] - bl[ch]) * xl;
          o[ch] = t + (b - t) * yl;
        }
      }
    }
}

}  // namespace

void resize_forward(ResizeMethod m, int n, const ResizeGeom& g, const float* x, float* y,
                    float* work) {
  const Tables t = fill_tables(m, g, work);
  const TapTable &ty = t.y, &tx = t.x;
  if (m == ResizeMethod::kBilinear) return resize_bilinear_window(n, g, ty, tx, x, y);
  // Area's sum is divided by the box area, as one float (resize_area_op.cc's `scale`).
  const float post =
      m == ResizeMethod::kArea ? static_cast<float>(1.0 / (ty.post * tx.post)) : 1.0f;
  // Bicubic interpolates along y first, then x; area along x first (TensorFlow's kernels).
  const bool y_inner = m == ResizeMethod::kBicubic;
  const TapTable& outer = y_inner ? tx : ty;
  const TapTable& inner = y_inner ? ty : tx;
  for (int img = 0; img < n; ++img)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int ox = 0; ox < g.ow; ++ox) {
        float* o = y + ((int64_t{img} * g.oh + oy) * g.ow + ox) * g.c;
        const int oo = y_inner ? ox : oy, io = y_inner ? oy : ox;
        const int a0 = outer.off(oo), a1 = outer.off(oo + 1);
        const int b0 = inner.off(io), b1 = inner.off(io + 1);
        for (int ch = 0; ch < g.c; ++ch) {
          float sum = 0.0f;
          for (int a = a0; a < a1; ++a) {
            float part = 0.0f;
            for (int b = b0; b < b1; ++b) {
              const int wy = y_inner ? inner.idx(b) : outer.idx(a);
              const int wx = y_inner ? outer.idx(a) : inner.idx(b);
              part += window_pixel(g, x, img, wy, wx)[ch] * inner.wt(b);
            }
            sum += part * outer.wt(a);
          }
          o[ch] = m == ResizeMethod::kArea ? sum * post : sum;
        }
      }
}

void resize_backward(ResizeMethod m, int n, const ResizeGeom& g, const float* dy, float* dx,
                     float* work) {
  const Tables t = fill_tables(m, g, work);
  const TapTable &ty = t.y, &tx = t.x;
  const float post =
      m == ResizeMethod::kArea ? static_cast<float>(1.0 / (ty.post * tx.post)) : 1.0f;
  for (int img = 0; img < n; ++img)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int a = ty.off(oy); a < ty.off(oy + 1); ++a)
        for (int ox = 0; ox < g.ow; ++ox) {
          const float* gr = dy + ((int64_t{img} * g.oh + oy) * g.ow + ox) * g.c;
          for (int b = tx.off(ox); b < tx.off(ox + 1); ++b) {
            const float k = ty.wt(a) * tx.wt(b) * post;
            float* d = dx + (window_pixel(g, dx, img, ty.idx(a), tx.idx(b)) - dx);
            for (int ch = 0; ch < g.c; ++ch) d[ch] += k * gr[ch];
          }
        }
}

void resize_forward(ResizeMethod m, int n, const ResizeGeom& g, const float* x, float* y) {
  std::vector<float> work(resize_work_floats(m, g));
  resize_forward(m, n, g, x, y, work.data());
}

void resize_backward(ResizeMethod m, int n, const ResizeGeom& g, const float* dy, float* dx) {
  std::vector<float> work(resize_work_floats(m, g));
  resize_backward(m, n, g, dy, dx, work.data());
}

namespace {

// TensorFlow's MapCoordinate for each fill mode (image_ops.h), then clamped into [0, len - 1]
// except for constant, whose outside reads take the fill value.
float map_coord(float v, int len, FillMode m) {
  const auto flen = static_cast<float>(len);
  switch (m) {
    case FillMode::kConstant:
      return v;
    case FillMode::kNearest:
      break;
    case FillMode::kReflect:
      if (len <= 1) return 0.0f;
      if (v < 0) {
        const float sz2 = 2.0f * flen;
        v = sz2 * static_cast<float>(static_cast<int64_t>(-v / sz2)) + v;
        v = v < -flen ? v + sz2 : -v - 1;
      } else if (v > flen - 1) {
        const float sz2 = 2.0f * flen;
        v -= sz2 * static_cast<float>(static_cast<int64_t>(v / sz2));
        if (v >= flen) v = sz2 - v - 1;
      }
      break;
    case FillMode::kWrap:
      if (len <= 1) return 0.0f;
      if (v < 0) {
        const float sz = flen - 1;
        v += flen * static_cast<float>(static_cast<int64_t>(-v / sz) + 1);
      } else if (v > flen - 1) {
        const float sz = flen - 1;
        v -= flen * static_cast<float>(static_cast<int64_t>(v / sz));
      }
      break;
  }
  return std::clamp(v, 0.0f, flen - 1);
}

// The reads making output pixel (ox, oy): one (nearest) or four (bilinear) input pixels, each an
// index into the image or -1 for the fill value; bilinear weighs read (i, j) by wy[i] * wx[j].
struct Sample {
  int64_t at[4];
  float wx[2], wy[2];
  bool bilinear;
};

Sample sample_at(int h, int w, const float* t, bool bilinear, FillMode fill, int ox, int oy) {
  Sample s{{-1, -1, -1, -1}, {1, 0}, {1, 0}, false};
  const auto fx = static_cast<float>(ox), fy = static_cast<float>(oy);
  const float k = t[6] * fx + t[7] * fy + 1.0f;
  if (k == 0.0f) return s;  // TensorFlow reads the fill value where the projection is 0
  const float x = map_coord((t[0] * fx + t[1] * fy + t[2]) / k, w, fill);
  const float y = map_coord((t[3] * fx + t[4] * fy + t[5]) / k, h, fill);
  auto index = [&](float yy, float xx) -> int64_t {
    if (yy < 0 || xx < 0 || yy >= static_cast<float>(h) || xx >= static_cast<float>(w)) return -1;
    return static_cast<int64_t>(yy) * w + static_cast<int64_t>(xx);
  };
  if (!bilinear) {
    s.at[0] = index(std::round(y), std::round(x));
    return s;
  }
  s.bilinear = true;
  const float y0 = std::floor(y), x0 = std::floor(x), y1 = y0 + 1, x1 = x0 + 1;
  s.wx[0] = x1 - x;
  s.wx[1] = x - x0;
  s.wy[0] = y1 - y;
  s.wy[1] = y - y0;
  s.at[0] = index(y0, x0);
  s.at[1] = index(y0, x1);
  s.at[2] = index(y1, x0);
  s.at[3] = index(y1, x1);
  return s;
}

}  // namespace

void affine_transform_forward(int n, int h, int w, int c, const float* t, bool bilinear,
                              FillMode fill, float fill_value, const float* x, float* y) {
  for (int img = 0; img < n; ++img) {
    const float* ti = t + 8 * int64_t{img};
    const float* image = x + int64_t{img} * h * w * c;
    for (int oy = 0; oy < h; ++oy)
      for (int ox = 0; ox < w; ++ox) {
        const Sample s = sample_at(h, w, ti, bilinear, fill, ox, oy);
        float* o = y + ((int64_t{img} * h + oy) * w + ox) * c;
        auto read = [&](int r, int ch) {
          return s.at[r] < 0 ? fill_value : image[s.at[r] * c + ch];
        };
        for (int ch = 0; ch < c; ++ch) {
          if (!s.bilinear) {
            o[ch] = read(0, ch);
            continue;
          }
          // TensorFlow's order: along x on both rows, then along y.
          const float top = s.wx[0] * read(0, ch) + s.wx[1] * read(1, ch);
          const float bottom = s.wx[0] * read(2, ch) + s.wx[1] * read(3, ch);
          o[ch] = s.wy[0] * top + s.wy[1] * bottom;
        }
      }
  }
}

void affine_transform_backward(int n, int h, int w, int c, const float* t, bool bilinear,
                               FillMode fill, const float* dy, float* dx) {
  for (int img = 0; img < n; ++img) {
    const float* ti = t + 8 * int64_t{img};
    float* image = dx + int64_t{img} * h * w * c;
    for (int oy = 0; oy < h; ++oy)
      for (int ox = 0; ox < w; ++ox) {
        const Sample s = sample_at(h, w, ti, bilinear, fill, ox, oy);
        const float* g = dy + ((int64_t{img} * h + oy) * w + ox) * c;
        for (int r = 0; r < (s.bilinear ? 4 : 1); ++r) {
          if (s.at[r] < 0) continue;
          const float k = s.bilinear ? s.wy[r / 2] * s.wx[r % 2] : 1.0f;
          float* d = image + s.at[r] * c;
          for (int ch = 0; ch < c; ++ch) d[ch] += k * g[ch];
        }
      }
  }
}

}  // namespace nnfleet
