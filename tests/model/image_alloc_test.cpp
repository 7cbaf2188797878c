// The image layers keep the layer contract's "forward() and backward() never allocate": every
// registry example of the resizing, cropping, upsampling and augmentation kinds runs a forward and
// a backward, in training and at inference, under the counting operator new of alloc_counter.cpp,
// with its scratch sized exactly by scratch_floats() and fenced by canaries (the resize kernels
// build their tap tables there, so a short size would show as an overwritten canary).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "layers/registry.h"
#include "tensor/rng.h"

long allocation_count();

namespace nnfleet {
namespace {

const char* const kKinds[] = {
    "UpSampling2D", "Resizing",          "CenterCrop", "RandomCrop",     "RandomRotation",
    "RandomZoom",   "RandomTranslation", "RandomFlip", "RandomContrast", "RandomBrightness"};

constexpr size_t kCanaries = 16;
constexpr float kCanary = -12345.5f;

// Runs forward + backward of one example (training or not) and returns the allocations made by
// the second run (the first warms up one-time statics such as the bicubic table).
long allocations(const std::string& kind, const LayerExample& ex, bool training,
                 std::string& fence) {
  const int n = 3;
  auto layer = make_layer(kind, ex.config, ConfigMode::kPlan, "layer");
  const std::vector<Shape>& ins = ex.inputs;
  const Shape out = layer->output_shape(ins);
  std::vector<float> x(static_cast<size_t>(n * ins[0].size()), 0.25f), dx(x.size(), 0.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) * 0.5f - 1.0f;
  std::vector<float> y(static_cast<size_t>(n * out.size())), dy(y.size(), 0.5f);
  std::vector<float> cache(layer->cache_floats(ins, n) + kCanaries, kCanary);
  std::vector<float> scratch(layer->scratch_floats(ins, n) + kCanaries, kCanary);
  const float* xp[] = {x.data()};
  float* dxp[] = {dx.data()};
  Rng rng(7);
  LayerArgs a;
  a.n = n;
  a.training = training;
  a.in_shapes = ins.data();
  a.out_shape = out;
  a.x = xp;
  a.y = y.data();
  a.cache = cache.data();
  a.scratch = scratch.data();
  a.rng = &rng;
  a.dy = dy.data();
  a.dx = dxp;
  auto run = [&] {
    layer->forward(a);
    layer->backward(a);
  };
  run();
  const long before = allocation_count();
  run();
  const long made = allocation_count() - before;
  for (size_t i = 0; i < kCanaries; ++i) {
    if (scratch[scratch.size() - 1 - i] != kCanary) fence = "scratch_floats() is too small";
    if (cache[cache.size() - 1 - i] != kCanary) fence = "cache_floats() is too small";
  }
  return made;
}

TEST(ImageLayers, ForwardAndBackwardDoNotAllocate) {
  int cases = 0;
  for (const auto& k : layer_kinds())
    for (const char* kind : kKinds) {
      if (std::strcmp(k.class_name, kind) != 0) continue;
      const std::vector<LayerExample> exs = k.examples();
      for (size_t i = 0; i < exs.size(); ++i)
        for (bool training : {false, true}) {
          std::string fence;
          EXPECT_EQ(allocations(kind, exs[i], training, fence), 0)
              << kind << " example " << i << (training ? " (training)" : "");
          EXPECT_EQ(fence, "") << kind << " example " << i;
          ++cases;
        }
    }
  EXPECT_GE(cases, 40);  // every kind above has examples
}

}  // namespace
}  // namespace nnfleet
