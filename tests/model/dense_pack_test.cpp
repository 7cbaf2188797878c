// DensePack: models trained as a pack (their first Dense layers one wide product) equal the same
// models trained alone on the same batches, bit for bit: outputs, gradients, weights, optimizer
// state and losses, over steps of W3's shapes (64 features; widths 8 to 128, depth 1 and 2, relu
// and tanh, three learning rates; full batches, the last partial one, and the ragged row counts
// 1 to 11 where gemm() takes its in-order path).
#include "model/dense_pack.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "layers/registry.h"
#include "nnfleet/error.h"

// Counting allocator hook (alloc_counter.cpp replaces the global operator new).
long allocation_count();

namespace nnfleet {
namespace {

constexpr int kFeatures = 64;

std::unique_ptr<Layer> L(const char* cls, Json cfg, const std::string& name) {
  return make_layer(cls, cfg, ConfigMode::kPlan, name);
}

struct W3Member {
  std::shared_ptr<const Model> model;
  TrainSpec train;
};

// W3's grid for one batch size: 5 widths x 2 depths x 2 activations x 3 learning rates.
std::vector<W3Member> w3_members() {
  std::vector<W3Member> out;
  for (int depth : {1, 2})
    for (int width : {8, 16, 32, 64, 128})
      for (const char* act : {"relu", "tanh"})
        for (double lr : {1e-3, 3e-3, 1e-2}) {
          std::vector<std::unique_ptr<Layer>> ls;
          for (int d = 0; d < depth; ++d)
            ls.push_back(
                L("Dense", {{"units", width}, {"activation", act}}, "dense_" + std::to_string(d)));
          ls.push_back(L("Dense", {{"units", 10}, {"activation", "softmax"}}, "out"));
          const std::string name = "w3-d" + std::to_string(depth) + "-" + std::to_string(width) +
                                   "-" + act + "-lr" + std::to_string(lr);
          out.push_back({Model::sequential(name, Shape{kFeatures}, std::move(ls)),
                         TrainSpec{parse_loss("sparse_categorical_crossentropy"),
                                   parse_optimizer(Json{
                                       {"Adam", {{"learning_rate", lr}, {"epsilon", 1e-7}}}})}});
        }
  return out;
}

bool same_bits(const float* a, const float* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(float)) == 0;
}

// Every member of the pack against its twin trained alone: the last step's output and layer
// outputs, gradients, weights, optimizer state and loss, bit for bit.
void expect_twins(const std::vector<Network>& alone, const std::vector<Network>& packed,
                  const std::vector<double>& want, const std::vector<double>& got, int n,
                  int step) {
  for (size_t k = 0; k < alone.size(); ++k) {
    SCOPED_TRACE(alone[k].model().name() + ", step " + std::to_string(step));
    const Network &a = alone[k], &p = packed[k];
    EXPECT_EQ(std::memcmp(&want[k], &got[k], sizeof(double)), 0) << want[k] << " vs " << got[k];
    for (size_t i = 0; i < a.model().num_layers(); ++i)
      EXPECT_TRUE(same_bits(a.layer_output(i), p.layer_output(i),
                            static_cast<size_t>(n) * a.model().planned(i).out_shape.size()))
          << "layer " << i;
    EXPECT_TRUE(same_bits(a.gradients(), p.gradients(), a.num_trainable()));
    EXPECT_TRUE(same_bits(a.params(), p.params(), a.num_params()));
    EXPECT_TRUE(same_bits(a.optimizer_state(), p.optimizer_state(), a.optimizer_state_floats()));
  }
}

// Trains W3's models of one batch size alone and as one pack over the same batches; `stop_at`
// takes member 0 out of the pack (as early stopping would) from that step on.
void train_twins(int batch, const std::vector<int>& rows, int stop_at) {
  const std::vector<W3Member> specs = w3_members();
  std::vector<Network> alone, packed;
  alone.reserve(specs.size());
  packed.reserve(specs.size());
  for (size_t k = 0; k < specs.size(); ++k) {
    alone.emplace_back(specs[k].model, batch, specs[k].train);
    packed.emplace_back(specs[k].model, batch, specs[k].train);
    Rng ia(100 + k), ip(100 + k);
    alone.back().initialize(ia);
    packed.back().initialize(ip);
  }
  std::vector<Network*> members;
  for (Network& n : packed) members.push_back(&n);
  DensePack pack(members);
  EXPECT_EQ(pack.columns(), 2 * 2 * 3 * (8 + 16 + 32 + 64 + 128));
  Rng data(7);
  std::vector<float> x(static_cast<size_t>(batch) * kFeatures);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  std::vector<char> active(specs.size(), 1);
  std::vector<double> want(specs.size()), got(specs.size());
  for (size_t s = 0; s < rows.size(); ++s) {
    const int n = rows[s];
    // Digits' pixels are 0..16, divided by 16.
    for (int i = 0; i < n * kFeatures; ++i) x[static_cast<size_t>(i)] = data.below(17) / 16.0f;
    for (int i = 0; i < n; ++i)
      labels[static_cast<size_t>(i)] = static_cast<int32_t>(data.below(10));
    Targets t;
    t.labels = labels.data();
    std::vector<const Targets*> ts(specs.size(), &t);
    if (static_cast<int>(s) == stop_at) active[0] = 0;
    for (size_t k = 0; k < specs.size(); ++k) {
      if (!active[k]) continue;
      std::memcpy(alone[k].input(), x.data(), static_cast<size_t>(n) * kFeatures * sizeof(float));
      want[k] = alone[k].train_step(n, t);
    }
    pack.train_step(n, x.data(), ts.data(), active.data(), got.data());
    expect_twins(alone, packed, want, got, n, static_cast<int>(s));
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(DensePack, W3BatchOf16EqualsEachModelAloneBitForBit) {
  // 1,437 training rows: batches of 16, the last of 13; then every ragged count 1 to 11.
  train_twins(16, {16, 16, 13, 16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16}, -1);
}

TEST(DensePack, W3BatchOf32EqualsEachModelAloneBitForBit) {
  train_twins(32, {32, 32, 29, 32, 12, 32}, -1);
}

TEST(DensePack, AMemberLeavingChangesNoBitOfTheOthers) {
  train_twins(16, {16, 16, 13, 16, 16, 7}, 2);
}

TEST(DensePack, AStepAllocatesNothing) {
  const std::vector<W3Member> specs = w3_members();
  std::vector<Network> nets;
  nets.reserve(specs.size());
  std::vector<Network*> members;
  for (const W3Member& m : specs) {
    nets.emplace_back(m.model, 16, m.train);
    Rng init(1);
    nets.back().initialize(init);
    members.push_back(&nets.back());
  }
  DensePack pack(members);
  std::vector<float> x(16 * kFeatures, 0.5f);
  std::vector<int32_t> labels(16, 1);
  Targets t;
  t.labels = labels.data();
  std::vector<const Targets*> ts(specs.size(), &t);
  std::vector<char> active(specs.size(), 1);
  std::vector<double> losses(specs.size());
  // Warm-up: libxsmm generates (and caches) a kernel the first time it meets a GEMM shape.
  pack.train_step(16, x.data(), ts.data(), active.data(), losses.data());
  pack.train_step(13, x.data(), ts.data(), active.data(), losses.data());
  const long before = allocation_count();
  for (int s = 0; s < 4; ++s)
    pack.train_step(s % 2 ? 16 : 13, x.data(), ts.data(), active.data(), losses.data());
  EXPECT_EQ(allocation_count() - before, 0);
}

TEST(DensePack, RefusesAMemberThatCannotJoinByName) {
  const std::vector<W3Member> specs = w3_members();
  auto conv_first = [] {
    std::vector<std::unique_ptr<Layer>> ls;
    ls.push_back(L("Reshape", {{"target_shape", {8, 8, 1}}}, "reshape"));
    ls.push_back(L("Flatten", Json::object(), "flatten"));
    ls.push_back(L("Dense", {{"units", 10}, {"activation", "softmax"}}, "out"));
    return Model::sequential("reshaped", Shape{kFeatures}, std::move(ls));
  };
  Network a(specs[0].model, 16, specs[0].train), b(conv_first(), 16, specs[0].train);
  try {
    DensePack pack({&a, &b});
    FAIL() << "packed a model whose first layer is not Dense";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("failed to pack model 'reshaped' (member 2)"),
              std::string::npos)
        << e.what();
  }
  Network c(specs[1].model, 32, specs[1].train);
  EXPECT_THROW(DensePack({&a, &c}), ModelError);
  // A refused pack leaves its members as they were: a plain step still trains all layers.
  Network d(specs[0].model, 16, specs[0].train);
  Rng r1(1), r2(1);
  a.initialize(r1);
  d.initialize(r2);
  std::vector<int32_t> labels(16, 3);
  Targets t;
  t.labels = labels.data();
  for (int i = 0; i < 16 * kFeatures; ++i) a.input()[i] = d.input()[i] = (i % 17) / 16.0f;
  EXPECT_EQ(a.train_step(16, t), d.train_step(16, t));
  EXPECT_TRUE(same_bits(a.params(), d.params(), a.num_params()));
}

}  // namespace
}  // namespace nnfleet
