// ONNX exporters of the image preprocessing and augmentation layers: Resizing and the inference
// form of CenterCrop / RandomCrop as Slice (the crop window) then Resize (half-pixel linear, or
// TensorFlow's half-pixel nearest). Bicubic and area have no exact ONNX Resize mode (ONNX's cubic
// evaluates the Keys kernel exactly where TensorFlow rounds the fraction to 1/1024, up to 1e-3
// apart; ONNX has no box filter): both are separable linear maps, exported as two MatMuls with
// the kernel's own weights (kernels/resize.h resize_axis_taps), also for UpSampling2D. The
// Random* augmentation layers are the identity at inference, which is what an exported model
// computes.
#include "io/onnx/onnx_builder.h"
#include "kernels/resize.h"
#include "layers/image_util.h"

namespace nnfleet::onnx_export {
namespace {

const std::string& base_of(const LayerNode& n) { return n.layer.name(); }

}  // namespace

// x [N, CH, CW, C] (the window already cut) resized by `m` as Ry [OH, CH] . x . Rx^T [CW, OW]
// per channel, the matrices holding the taps' weights (area's 1 / box area folded into Rx).
std::string resize_by_matrices(Builder& b, const LayerNode& n, const std::string& x,
                               const ResizeGeom& g, ResizeMethod m) {
  const AxisTaps ty = resize_axis_taps(m, g.ch, g.oh), tx = resize_axis_taps(m, g.cw, g.ow);
  const float post =
      m == ResizeMethod::kArea ? static_cast<float>(1.0 / (ty.post * tx.post)) : 1.0f;
  std::vector<float> ry(static_cast<size_t>(g.oh) * g.ch, 0.0f),
      rxt(static_cast<size_t>(g.cw) * g.ow, 0.0f);
  for (int o = 0; o < g.oh; ++o)
    for (int k = ty.off[static_cast<size_t>(o)]; k < ty.off[static_cast<size_t>(o) + 1]; ++k)
      ry[static_cast<size_t>(o) * g.ch + static_cast<size_t>(ty.idx[static_cast<size_t>(k)])] +=
          ty.wt[static_cast<size_t>(k)];
  for (int o = 0; o < g.ow; ++o)
    for (int k = tx.off[static_cast<size_t>(o)]; k < tx.off[static_cast<size_t>(o) + 1]; ++k)
      rxt[static_cast<size_t>(tx.idx[static_cast<size_t>(k)]) * g.ow + static_cast<size_t>(o)] +=
          tx.wt[static_cast<size_t>(k)] * post;
  const std::string& nm = n.layer.name();
  const std::string t = b.transpose(x, to_channels_first(2), nm);
  const std::string u = b.node("MatMul", {t, b.weight(nm + "/rx", {g.cw, g.ow}, rxt)}, nm);
  const std::string v = b.node("MatMul", {b.weight(nm + "/ry", {g.oh, g.ch}, ry), u}, nm);
  return b.transpose(v, to_channels_last(2), nm);
}

namespace {

// x [N, H, W, C] cropped to the window of `g` and resized to g.oh x g.ow by `interp`.
std::string crop_resize(Builder& b, const LayerNode& n, const ResizeGeom& g,
                        const std::string& interp) {
  std::string x = n.inputs[0];
  const std::string& nm = base_of(n);
  if (g.ch != g.h || g.cw != g.w)
    x = b.node("Slice",
               {x, b.ints(nm + "/starts", {g.y0, g.x0}),
                b.ints(nm + "/ends", {g.y0 + g.ch, g.x0 + g.cw}), b.ints(nm + "/axes", {1, 2})},
               nm);
  if (g.ch == g.oh && g.cw == g.ow) return x;  // a pure crop (CenterCrop)
  std::vector<Attr> attrs;
  if (interp == "bilinear") {
    attrs = {attr_s("mode", "linear"), attr_s("coordinate_transformation_mode", "half_pixel")};
  } else if (interp == "nearest") {
    attrs = {attr_s("mode", "nearest"),
             attr_s("coordinate_transformation_mode", "tf_half_pixel_for_nn"),
             attr_s("nearest_mode", "floor")};
  } else if (interp == "bicubic" || interp == "area") {
    return resize_by_matrices(b, n, x, g,
                              interp == "area" ? ResizeMethod::kArea : ResizeMethod::kBicubic);
  } else {
    refuse(n, "interpolation '" + interp +
                  "' has no ONNX form; expected bilinear, nearest, "
                  "bicubic or area");
  }
  const std::string t = b.transpose(x, to_channels_first(2), nm);
  // The batch is free: sizes take N from the input's shape, the rest from the plan (scales
  // would round: floor(3 * float(5 / 3)) is 4).
  const std::string batch = b.node(
      "Slice", {b.node("Shape", {t}, nm), b.ints(nm + "/n0", {0}), b.ints(nm + "/n1", {1})}, nm);
  const std::string sizes =
      b.node("Concat", {batch, b.ints(nm + "/chw", {g.c, g.oh, g.ow})}, nm, {attr("axis", 0)});
  const std::string y = b.node("Resize", {t, "", "", sizes}, nm, attrs);
  return b.transpose(y, to_channels_last(2), nm);
}

ResizeGeom whole_image(const LayerNode& n, int oh, int ow) {
  const Shape& s = n.plan.in_shapes[0];
  ResizeGeom g;
  g.h = g.ch = static_cast<int>(s[0]);
  g.w = g.cw = static_cast<int>(s[1]);
  g.c = static_cast<int>(s[2]);
  g.oh = oh;
  g.ow = ow;
  return g;
}

ResizeGeom aspect_of(const LayerNode& n, int th, int tw) {
  const Shape& s = n.plan.in_shapes[0];
  return aspect_crop(static_cast<int>(s[0]), static_cast<int>(s[1]), static_cast<int>(s[2]), th,
                     tw);
}

std::string identity_of(const LayerNode& n) { return n.inputs[0]; }

}  // namespace

std::string export_resizing(Builder& b, const LayerNode& n) {
  const int th = n.config.value("height", 1), tw = n.config.value("width", 1);
  const ResizeGeom g =
      n.config.value("crop_to_aspect_ratio", false) ? aspect_of(n, th, tw) : whole_image(n, th, tw);
  return crop_resize(b, n, g, n.config.value("interpolation", std::string("bilinear")));
}
std::string export_center_crop(Builder& b, const LayerNode& n) {
  const int th = n.config.value("height", 1), tw = n.config.value("width", 1);
  const Shape& s = n.plan.in_shapes[0];
  if (s[0] < th || s[1] < tw) return crop_resize(b, n, aspect_of(n, th, tw), "bilinear");
  ResizeGeom g = whole_image(n, th, tw);
  g.ch = th;
  g.cw = tw;
  g.y0 = static_cast<int>(static_cast<float>(g.h - th) / 2.0f);
  g.x0 = static_cast<int>(static_cast<float>(g.w - tw) / 2.0f);
  return crop_resize(b, n, g, "bilinear");
}
std::string export_random_crop(Builder& b, const LayerNode& n) {
  return crop_resize(b, n, aspect_of(n, n.config.value("height", 1), n.config.value("width", 1)),
                     "bilinear");
}
std::string export_random_flip(Builder&, const LayerNode& n) { return identity_of(n); }
std::string export_random_rotation(Builder&, const LayerNode& n) { return identity_of(n); }
std::string export_random_zoom(Builder&, const LayerNode& n) { return identity_of(n); }
std::string export_random_translation(Builder&, const LayerNode& n) { return identity_of(n); }
std::string export_random_contrast(Builder&, const LayerNode& n) { return identity_of(n); }
std::string export_random_brightness(Builder&, const LayerNode& n) { return identity_of(n); }

}  // namespace nnfleet::onnx_export
