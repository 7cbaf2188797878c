// Shared layers (ModelNode::shares): a layer called on several tensors uses one set of weights,
// counted and updated once, and its gradient is the sum of every call's; a step gives the same
// bits however its pieces are spread over threads. Each input read as ids is checked on its own.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "layers/registry.h"
#include "model/network.h"

namespace nnfleet {
namespace {

std::unique_ptr<Layer> L(const char* cls, Json cfg, const char* name) {
  return make_layer(cls, cfg, ConfigMode::kPlan, name);
}

// a [3] and b [3] -> Dense(2, tanh) applied to both (shared, or two layers with their own
// weights) -> Add -> Dense(1). Ids: 0 a, 1 b, 2 dense(a), 3 dense(b) or dense_1(b), 4 add, 5 out.
std::shared_ptr<const Model> siamese(bool shared) {
  std::vector<ModelNode> nodes;
  nodes.push_back({L("Dense", {{"units", 2}, {"activation", "tanh"}}, "dense"), {0}});
  nodes.push_back({L("Dense", {{"units", 2}, {"activation", "tanh"}}, shared ? "dense" : "dense_1"),
                   {1},
                   {},
                   {},
                   shared ? 0 : -1});
  nodes.push_back({L("Add", Json::object(), "add"), {2, 3}});
  nodes.push_back({L("Dense", {{"units", 1}}, "out"), {4}});
  return std::make_shared<const Model>("siamese",
                                       std::vector<ModelInput>{{"a", Shape{3}}, {"b", Shape{3}}},
                                       std::move(nodes), std::vector<int>{5});
}

TrainSpec sgd() {
  return TrainSpec{parse_loss("mse"), parse_optimizer(Json{{"SGD", {{"learning_rate", 0.1}}}})};
}

void fill(Network& net, Rng& rng, int n, std::vector<float>& y) {
  for (int i = 0; i < n * 3; ++i) net.input(0)[i] = rng.uniform() - 0.5f;
  for (int i = 0; i < n * 3; ++i) net.input(1)[i] = rng.uniform() - 0.5f;
  for (int i = 0; i < n; ++i) y[static_cast<size_t>(i)] = rng.uniform();
}

TEST(SharedLayer, WeightsAreCountedOnceAndLaidOutAtTheirOwner) {
  const auto s = siamese(true), u = siamese(false);
  EXPECT_EQ(s->trainable_params(), 3u * 2 + 2 + 2 + 1);
  EXPECT_EQ(u->trainable_params(), 2 * (3u * 2 + 2) + 2 + 1);
  EXPECT_EQ(s->shares(1), 0);
  EXPECT_EQ(s->call_index(1), 1);
  EXPECT_EQ(s->call_index(0), 0);
  const auto layout = param_layout(*s);
  EXPECT_EQ(layout[1], layout[0]);
  EXPECT_EQ(s->output_name(0), "out");
  EXPECT_FALSE(s->is_sequential());
}

// The shared Dense's gradient equals the sum of the gradients of the two unshared Dense layers
// holding the same weights; the loss and the output gradient agree too.
TEST(SharedLayer, GradientIsTheSumOfEveryCallsGradient) {
  Network shared(siamese(true), 8, sgd());
  Network apart(siamese(false), 8, sgd());
  Rng init(3);
  shared.initialize(init);
  // The unshared model gets the same weights in both Dense layers: [k b] [k b] [out].
  const float* p = shared.params();
  float* q = apart.params();
  std::copy(p, p + 8, q);
  std::copy(p, p + 8, q + 8);
  std::copy(p + 8, p + 11, q + 16);
  std::vector<float> y(8);
  Rng data(4);
  fill(shared, data, 8, y);
  std::copy(shared.input(0), shared.input(0) + 24, apart.input(0));
  std::copy(shared.input(1), shared.input(1) + 24, apart.input(1));
  Targets t;
  t.values = y.data();
  const double ls = shared.train_step(8, t), lu = apart.train_step(8, t);
  EXPECT_EQ(ls, lu);
  const float* gs = shared.gradients();
  const float* gu = apart.gradients();
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(gs[i], gu[i] + gu[i + 8], 1e-6f) << i;
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(gs[8 + i], gu[16 + i]) << i;
  // Both calls did contribute.
  EXPECT_NE(gu[0], 0.0f);
  EXPECT_NE(gu[8], 0.0f);
}

// Central differences of the loss over the shared kernel agree with the summed gradient.
TEST(SharedLayer, GradientMatchesFiniteDifferences) {
  const auto model = siamese(true);
  Network net(model, 4, sgd());
  Network probe(model, 4);
  Rng init(7), data(8);
  net.initialize(init);
  std::vector<float> y(4);
  fill(net, data, 4, y);
  std::copy(net.input(0), net.input(0) + 12, probe.input(0));
  std::copy(net.input(1), net.input(1) + 12, probe.input(1));
  std::vector<float> w(net.params(), net.params() + net.num_params());
  auto loss_at = [&](const std::vector<float>& v) {
    std::copy(v.begin(), v.end(), probe.params());
    probe.forward(4, false);
    double l = 0;
    for (int i = 0; i < 4; ++i) {
      const double d = probe.output()[i] - y[static_cast<size_t>(i)];
      l += d * d;
    }
    return l / 4;
  };
  Targets t;
  t.values = y.data();
  net.train_step(4, t);
  for (size_t i = 0; i < 8; ++i) {
    std::vector<float> plus = w, minus = w;
    const float h = 1e-2f;
    plus[i] += h;
    minus[i] -= h;
    const double fd = (loss_at(plus) - loss_at(minus)) / (2.0 * h);
    EXPECT_NEAR(net.gradients()[i], fd, 2e-3) << i;
  }
}

// Pieces of every step on two threads give the same bits as the pieces in order (the summed
// gradient of a shared layer is added in piece order either way).
TEST(SharedLayer, TrainingIsBitIdenticalHoweverPiecesAreSpreadOverThreads) {
  auto run = [](bool threads) {
    Network net(siamese(true), 16, sgd(), 4);
    EXPECT_EQ(net.pieces(), 4);
    Rng init(1), data(2);
    net.initialize(init);
    std::vector<float> y(16);
    Targets t;
    t.values = y.data();
    for (int s = 0; s < 20; ++s) {
      const int n = s % 2 ? 16 : 11;
      fill(net, data, n, y);
      if (!threads) {
        net.train_step(n, t);
        continue;
      }
      net.begin_step(n, t);
      for (auto phase : {&Network::train_piece, &Network::update_piece}) {
        std::atomic<int> next{0};
        auto claim = [&] {
          for (int p; (p = next.fetch_add(1)) < net.pieces();) (net.*phase)(p);
        };
        std::thread helper(claim);
        claim();
        helper.join();
      }
      net.end_step();
    }
    return std::vector<float>(net.params(), net.params() + net.num_params());
  };
  EXPECT_EQ(run(true), run(false));
}

TEST(SharedLayer, CallsOnInputsNeedingOtherWeightsAreRefused) {
  std::vector<ModelNode> nodes;
  nodes.push_back({L("Dense", {{"units", 2}}, "dense"), {0}});
  nodes.push_back({L("Dense", {{"units", 2}}, "dense"), {1}, {}, {}, 0});
  nodes.push_back({L("Concatenate", Json::object(), "cat"), {2, 3}});
  try {
    Model("m", std::vector<ModelInput>{{"a", Shape{3}}, {"b", Shape{4}}}, std::move(nodes),
          std::vector<int>{4});
    FAIL() << "expected a ModelError";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("needs other weights than its first call"),
              std::string::npos)
        << e.what();
  }
}

// One Embedding reached from two inputs (the three-input model of issue 35): both inputs are
// checked as ids, each with its own bound (the smallest of the layers reading it).
TEST(SharedLayer, AnEmbeddingSharedByTwoInputsChecksBothAsIds) {
  std::vector<ModelNode> nodes;
  nodes.push_back({L("Embedding", {{"input_dim", 10}, {"output_dim", 2}}, "emb"), {0}});
  nodes.push_back({L("Embedding", {{"input_dim", 10}, {"output_dim", 2}}, "emb"), {1}, {}, {}, 0});
  nodes.push_back({L("Embedding", {{"input_dim", 5}, {"output_dim", 2}}, "emb_b"), {1}});
  nodes.push_back({L("Flatten", Json::object(), "flat_a"), {3}});
  nodes.push_back({L("Flatten", Json::object(), "flat_b"), {4}});
  nodes.push_back({L("Flatten", Json::object(), "flat_c"), {5}});
  nodes.push_back({L("Flatten", Json::object(), "flat_x"), {2}});
  nodes.push_back({L("Concatenate", Json::object(), "cat"), {6, 7, 8, 9}});
  const Model m("three", std::vector<ModelInput>{{"a", Shape{4}}, {"b", Shape{4}}, {"x", Shape{3}}},
                std::move(nodes), std::vector<int>{10});
  ASSERT_EQ(m.id_inputs().size(), 2u);
  EXPECT_EQ(m.id_inputs()[0].input, 0u);
  EXPECT_EQ(m.id_inputs()[0].limit, 10);
  EXPECT_EQ(m.id_inputs()[1].input, 1u);
  EXPECT_EQ(m.id_inputs()[1].limit, 5);
  EXPECT_EQ(m.id_inputs()[1].layer, "emb_b");
  EXPECT_EQ(m.id_input_of(2), nullptr);
  EXPECT_EQ(m.trainable_params(), 10u * 2 + 5 * 2);
}

}  // namespace
}  // namespace nnfleet
