// ONNX exporters of the image preprocessing and augmentation layers: Resizing and the inference
// form of CenterCrop / RandomCrop as Slice (the crop window) then Resize (half-pixel linear,
// TensorFlow's half-pixel nearest, or Keys cubic a = -0.5 with taps outside the image excluded);
// the Random* augmentation layers are the identity at inference, which is what an exported model
// computes. Resizing's "area" (TensorFlow's resize_area) has no ONNX Resize mode and is refused.
#include "io/onnx/onnx_builder.h"
#include "kernels/resize.h"
#include "layers/image_util.h"

namespace nnfleet::onnx_export {
namespace {

const std::string& base_of(const LayerNode& n) { return n.layer.name(); }

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
  } else if (interp == "bicubic") {
    attrs = {attr_s("mode", "cubic"), attr_s("coordinate_transformation_mode", "half_pixel"),
             attr_f("cubic_coeff_a", -0.5f), attr("exclude_outside", 1)};
  } else {
    refuse(n, "interpolation '" + interp +
                  "' (TensorFlow's resize_area) has no ONNX Resize mode; expected bilinear, "
                  "nearest or bicubic");
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
