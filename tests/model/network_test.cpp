// Model building (shape inference and its errors) and the Network's training step: no heap
// allocation once built, gradients that train, and graph (non-sequential) models.
#include "model/network.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

#include "layers/registry.h"

// Counting allocator hook (alloc_counter.cpp replaces the global operator new).
long allocation_count();

namespace nnfleet {
namespace {

std::unique_ptr<Layer> L(const char* cls, Json cfg, const char* name) {
  return make_layer(cls, cfg, ConfigMode::kPlan, name);
}

std::shared_ptr<const Model> cnn() {
  std::vector<std::unique_ptr<Layer>> ls;
  ls.push_back(L("Conv2D", {{"filters", 4}, {"kernel_size", 3}, {"activation", "relu"}}, "conv2d"));
  ls.push_back(L("BatchNormalization", Json::object(), "batch_normalization"));
  ls.push_back(L("MaxPooling2D", {{"pool_size", 2}}, "max_pooling2d"));
  ls.push_back(L("Dropout", {{"rate", 0.25}}, "dropout"));
  ls.push_back(L("Flatten", Json::object(), "flatten"));
  ls.push_back(L("Dense", {{"units", 8}, {"activation", "tanh"}}, "dense"));
  ls.push_back(L("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense_1"));
  return Model::sequential("cnn", Shape{8, 8, 1}, std::move(ls));
}

// cnn() without BatchNormalization (which mixes samples, so a batch with it is never split).
std::shared_ptr<const Model> splittable_cnn(bool dropout) {
  std::vector<std::unique_ptr<Layer>> ls;
  ls.push_back(L("Conv2D", {{"filters", 4}, {"kernel_size", 3}, {"activation", "relu"}}, "conv2d"));
  ls.push_back(L("MaxPooling2D", {{"pool_size", 2}}, "max_pooling2d"));
  if (dropout) ls.push_back(L("Dropout", {{"rate", 0.25}}, "dropout"));
  ls.push_back(L("Flatten", Json::object(), "flatten"));
  ls.push_back(L("Dense", {{"units", 8}, {"activation", "tanh"}}, "dense"));
  ls.push_back(L("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense_1"));
  return Model::sequential("cnn", Shape{8, 8, 1}, std::move(ls));
}

TrainSpec adam_spec() {
  return TrainSpec{parse_loss("sparse_categorical_crossentropy"), parse_optimizer("adam")};
}

// Trains `net` for a few steps of batches of 13, 16 and 2 rows (the last ones smaller than a
// piece), calling `step` for each; returns the losses.
template <typename Step>
std::vector<double> train_some(Network& net, Step step) {
  Rng init(5), data(6);
  net.initialize(init);
  std::vector<int32_t> labels(16);
  std::vector<double> losses;
  for (int s = 0; s < 9; ++s) {
    const int n = s % 3 == 0 ? 13 : (s % 3 == 1 ? 16 : 2);
    for (int i = 0; i < n * 64; ++i) net.input()[i] = data.uniform();
    for (int i = 0; i < n; ++i)
      labels[static_cast<size_t>(i)] = static_cast<int32_t>(data.below(3));
    Targets t;
    t.labels = labels.data();
    losses.push_back(step(n, t));
  }
  return losses;
}

TEST(Network, SplitBatchMatchesTheWholeBatchUpToRounding) {
  Network whole(splittable_cnn(false), 16, adam_spec());
  const auto want =
      train_some(whole, [&](int n, const Targets& t) { return whole.train_step(n, t); });
  for (int pieces : {2, 3, 16}) {
    Network split(splittable_cnn(false), 16, adam_spec(), pieces);
    EXPECT_EQ(split.pieces(), pieces);
    const auto got =
        train_some(split, [&](int n, const Targets& t) { return split.train_step(n, t); });
    for (size_t s = 0; s < want.size(); ++s)
      EXPECT_NEAR(got[s], want[s], 1e-5) << pieces << " pieces";
    for (size_t i = 0; i < whole.num_params(); ++i)
      ASSERT_NEAR(split.params()[i], whole.params()[i], 1e-5) << pieces << " pieces, param " << i;
  }
}

// A sequence classifier whose Bidirectional LSTM has dropout and recurrent_dropout (each half
// its own masks from the model's stream), over inputs [16, 4] (64 floats, as splittable_cnn's).
std::shared_ptr<const Model> bidirectional_dropout_rnn() {
  std::vector<std::unique_ptr<Layer>> ls;
  const Json lstm = {
      {"class_name", "LSTM"},
      {"config",
       {{"units", 3}, {"dropout", 0.3}, {"recurrent_dropout", 0.3}, {"return_sequences", true}}}};
  ls.push_back(L("Bidirectional", {{"layer", lstm}}, "bidirectional"));
  ls.push_back(L("Flatten", Json::object(), "flatten"));
  ls.push_back(L("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense"));
  return Model::sequential("birnn", Shape{16, 4}, std::move(ls));
}

// The pieces of each step computed by two threads (in whatever order they claim them) give
// bit-identical weights to the pieces computed one after the other, dropout included (a
// Dropout layer, and the masks inside a Bidirectional RNN).
TEST(Network, PiecesOnTwoThreadsEqualPiecesInOrderBitForBit) {
  for (const auto& model : {splittable_cnn(true), bidirectional_dropout_rnn()}) {
    SCOPED_TRACE(model->name());
    Network in_order(model, 16, adam_spec(), 4);
    const auto want =
        train_some(in_order, [&](int n, const Targets& t) { return in_order.train_step(n, t); });
    Network threaded(model, 16, adam_spec(), 4);
    const auto got = train_some(threaded, [&](int n, const Targets& t) {
      threaded.begin_step(n, t);
      // Both phases on two threads, each claiming the next piece.
      for (auto phase : {&Network::train_piece, &Network::update_piece}) {
        std::atomic<int> next{0};
        auto claim = [&] {
          for (int p; (p = next.fetch_add(1)) < threaded.pieces();) (threaded.*phase)(p);
        };
        std::thread helper(claim);
        claim();
        helper.join();
      }
      return threaded.end_step();
    });
    EXPECT_EQ(got, want);
    EXPECT_EQ(std::vector<float>(threaded.params(), threaded.params() + threaded.num_params()),
              std::vector<float>(in_order.params(), in_order.params() + in_order.num_params()));
    // The batch really was split into pieces.
    EXPECT_GT(threaded.pieces(), 1);
  }
}

TEST(Network, BatchStatisticsAreNeverSplitAndInferenceIsWhole) {
  EXPECT_EQ(Network(cnn(), 16, adam_spec(), 4).pieces(), 1);                 // BatchNormalization
  EXPECT_EQ(Network(splittable_cnn(false), 16).pieces(), 1);                 // inference
  EXPECT_EQ(Network(splittable_cnn(false), 5, adam_spec(), 4).pieces(), 3);  // pieces of 2 rows
  EXPECT_EQ(Network(splittable_cnn(false), 4, adam_spec(), 9).pieces(), 4);  // at most a row each
}

TEST(Model, ShapeErrorNamesModelLayerAndFix) {
  std::vector<std::unique_ptr<Layer>> ls;
  ls.push_back(L("Conv2D", {{"filters", 8}, {"kernel_size", 3}}, "conv2d"));
  ls.push_back(L("MaxPooling2D", {{"pool_size", 2}}, "max_pooling2d"));
  ls.push_back(L("Conv1D", {{"filters", 10}, {"kernel_size", 3}}, "conv1d"));
  try {
    Model::sequential("cnn", Shape{28, 28, 1}, std::move(ls));
    FAIL() << "expected a ModelError";
  } catch (const ModelError& e) {
    EXPECT_STREQ(e.what(),
                 "failed to build model 'cnn': layer 3 'conv1d' (Conv1D) expects rank 3 input, got "
                 "[None,13,13,8]; 1-D convolution and pooling layers take sequences "
                 "[batch,steps,channels]; add a Reshape before it");
  }
}

TEST(Model, DenseAppliesToTheLastAxisOfAnyRank) {
  std::vector<std::unique_ptr<Layer>> ls;
  ls.push_back(L("Conv2D", {{"filters", 8}, {"kernel_size", 3}}, "conv2d"));
  ls.push_back(L("Dense", {{"units", 10}}, "dense_1"));
  auto m = Model::sequential("cnn", Shape{28, 28, 1}, std::move(ls));
  EXPECT_EQ(m->output_shape(), (Shape{26, 26, 10}));
  EXPECT_EQ(m->planned(1).params[0].shape, (Shape{8, 10}));  // Keras: kernel [last axis, units]
}

TEST(Model, EmbeddingMustReadTheModelInput) {
  std::vector<std::unique_ptr<Layer>> ls;
  ls.push_back(L("Reshape", {{"target_shape", Json{4}}}, "reshape"));
  ls.push_back(L("Embedding", {{"input_dim", 10}, {"output_dim", 3}}, "embedding"));
  try {
    Model::sequential("m", Shape{2, 2}, std::move(ls));
    FAIL() << "expected a ModelError";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 2 'embedding' (Embedding) reads integer ids"),
              std::string::npos)
        << e.what();
  }
  std::vector<std::unique_ptr<Layer>> ok;
  ok.push_back(L("Embedding", {{"input_dim", 10}, {"output_dim", 3}}, "embedding"));
  auto m = Model::sequential("m", Shape{4}, std::move(ok));
  EXPECT_EQ(m->id_input().layer, "embedding");
  EXPECT_EQ(m->id_input().limit, 10);
  EXPECT_EQ(m->output_shape(), (Shape{4, 3}));
}

// Embedding(mask_zero) masks the padding ids for the layers after it: Dense passes the mask on
// and GlobalAveragePooling1D then averages over the real steps only, as Keras does.
TEST(Network, MaskZeroPaddingIsLeftOutOfAMaskedAverage) {
  std::vector<std::unique_ptr<Layer>> ls;
  ls.push_back(L("Embedding", {{"input_dim", 3}, {"output_dim", 2}, {"mask_zero", true}}, "e"));
  ls.push_back(L("Dense", {{"units", 2}, {"use_bias", false}}, "d"));
  ls.push_back(L("GlobalAveragePooling1D", Json::object(), "g"));
  auto m = Model::sequential("m", Shape{4}, std::move(ls));
  const std::vector<float> params = {0, 1, 10, 11, 20, 21,  // embeddings [3,2]
                                     1, 0, 0,  1};          // identity Dense kernel
  Network net(m, 2, params.data());
  const float ids[] = {2, 0, 1, 0,   // real steps 0 and 2: mean of rows 2 and 1
                       0, 0, 2, 2};  // real steps 2 and 3: row 2
  std::copy(ids, ids + 8, net.input());
  net.forward(2, false);
  EXPECT_EQ(std::vector<float>(net.output(), net.output() + 4),
            (std::vector<float>{15, 16, 20, 21}));
}

TEST(Model, CountsParametersAndFlops) {
  auto m = cnn();
  // conv 3*3*1*4+4, bn 4+4 trainable (+8 fixed), dense 36*8+8, dense 8*3+3.
  EXPECT_EQ(m->trainable_params(), 40u + 8u + 296u + 27u);
  EXPECT_EQ(m->non_trainable_params(), 8u);
  EXPECT_EQ(m->output_shape(), (Shape{3}));
  EXPECT_DOUBLE_EQ(m->forward_flops(), 2.0 * 6 * 6 * 4 * 9 + 2.0 * 36 * 8 + 2.0 * 8 * 3);
}

TEST(Model, RepeatedLayerNamesAreRefused) {
  std::vector<std::unique_ptr<Layer>> ls;
  ls.push_back(L("Dense", {{"units", 2}}, "d"));
  ls.push_back(L("Dense", {{"units", 2}}, "d"));
  EXPECT_THROW(Model::sequential("m", Shape{3}, std::move(ls)), ModelError);
}

// Every step's parameter gradients are its own: layers that write theirs (Dense's, LayerArgs::
// dparams_fresh) and those zeroed first leave nothing of earlier steps, whole or split, also
// when the last step leaves the second piece without rows. A network that ran three steps
// takes the same fourth step, bit for bit, as a new one given its weights, optimizer state and
// dropout stream.
TEST(Network, EachStepsGradientsAreItsOwn) {
  for (int pieces : {1, 2}) {
    for (int last_n : {16, 5}) {
      Network ran(splittable_cnn(true), 16, adam_spec(), pieces),
          fresh(splittable_cnn(true), 16, adam_spec(), pieces);
      int step = 0;
      std::vector<double> losses;
      train_some(ran, [&](int n, const Targets& t) {
        if (step++ == 3) {  // the fourth step, on both
          std::copy(ran.params(), ran.params() + ran.num_params(), fresh.params());
          std::copy(ran.optimizer_state(), ran.optimizer_state() + ran.optimizer_state_floats(),
                    fresh.optimizer_state());
          fresh.set_iterations(ran.iterations());
          fresh.set_rng(ran.rng());
          std::copy(ran.input(), ran.input() + last_n * 64, fresh.input());
          losses.push_back(fresh.train_step(last_n, t));
          losses.push_back(ran.train_step(last_n, t));
          return losses.back();
        }
        return step > 4 ? 0.0 : ran.train_step(n, t);
      });
      const std::string what =
          std::to_string(pieces) + " piece(s), last step of " + std::to_string(last_n);
      ASSERT_EQ(losses.size(), 2u);
      EXPECT_EQ(losses[0], losses[1]) << what;
      EXPECT_EQ(std::memcmp(ran.gradients(), fresh.gradients(), ran.num_trainable() * 4), 0)
          << what;
      EXPECT_EQ(std::memcmp(ran.params(), fresh.params(), ran.num_params() * 4), 0) << what;
    }
  }
}

// A convolution's output read by an average pooling and by a dropout: the later of the two in
// the model writes the convolution's output gradient first, unzeroed (Layer::writes_whole_dx),
// and the other adds onto it. A linear model, so central differences are exact up to rounding.
TEST(Network, AnInputGradientWrittenUnzeroedTakesTheOtherReadersSum) {
  std::vector<ModelNode> nodes;
  nodes.push_back(
      {L("Conv2D", {{"filters", 2}, {"kernel_size", 3}, {"padding", "same"}}, "c"), {0}});
  nodes.push_back({L("AveragePooling2D", {{"pool_size", 2}}, "avg"), {1}});
  nodes.push_back({L("Flatten", Json::object(), "f1"), {2}});
  nodes.push_back({L("Dropout", {{"rate", 0.0}}, "drop"), {1}});
  nodes.push_back({L("Flatten", Json::object(), "f2"), {4}});
  nodes.push_back({L("Concatenate", Json::object(), "cat"), {3, 5}});
  nodes.push_back({L("Dense", {{"units", 1}}, "out"), {6}});
  const auto model =
      std::make_shared<const Model>("two_readers", std::vector<ModelInput>{{"x", Shape{4, 4, 2}}},
                                    std::move(nodes), std::vector<int>{7});
  const TrainSpec spec{parse_loss("mse"), parse_optimizer("sgd")};
  Network net(model, 3, spec), probe(model, 3);
  Rng rng(17);
  net.initialize(rng);
  for (int i = 0; i < 3 * 32; ++i) probe.input()[i] = net.input()[i] = rng.uniform() - 0.5f;
  std::vector<float> y = {0.3f, -0.2f, 0.1f};
  const std::vector<float> w(net.params(), net.params() + net.num_params());
  const auto loss_at = [&](const std::vector<float>& v) {
    std::copy(v.begin(), v.end(), probe.params());
    probe.forward(3, false);
    double l = 0;
    for (int i = 0; i < 3; ++i) l += std::pow(probe.output()[i] - y[static_cast<size_t>(i)], 2);
    return l / 3;
  };
  Targets t;
  t.values = y.data();
  net.train_step(3, t);
  for (size_t i = 0; i < 2 * 3 * 3 * 2; ++i) {  // the convolution's kernel
    std::vector<float> plus = w, minus = w;
    plus[i] += 1e-2f;
    minus[i] -= 1e-2f;
    const double fd = (loss_at(plus) - loss_at(minus)) / 2e-2;
    EXPECT_NEAR(net.gradients()[i], fd, 1e-3 * std::max(1.0, std::fabs(fd))) << i;
  }
}

TEST(Network, TrainingStepDoesNotAllocate) {
  for (int pieces : {1, 2}) {
    Network net(pieces == 1 ? cnn() : splittable_cnn(true), 16, adam_spec(), pieces);
    ASSERT_EQ(net.pieces(), pieces);
    Rng rng(1);
    net.initialize(rng);
    for (int i = 0; i < 16 * 64; ++i) net.input()[i] = rng.uniform();
    std::vector<int32_t> labels(16);
    for (int i = 0; i < 16; ++i) labels[static_cast<size_t>(i)] = i % 3;
    Targets t;
    t.labels = labels.data();
    // Warm-up: libxsmm generates (and caches) a kernel the first time it meets a GEMM shape.
    net.train_step(16, t);
    net.train_step(7, t);
    const long before = allocation_count();
    for (int s = 0; s < 5; ++s) net.train_step(s % 2 ? 16 : 7, t);
    net.evaluate_batch(16, net.train_spec().loss, t, nullptr);
    EXPECT_EQ(allocation_count() - before, 0) << pieces << " piece(s)";
  }
}

TEST(Network, LearnsASeparableProblem) {
  std::vector<std::unique_ptr<Layer>> ls;
  ls.push_back(L("Dense", {{"units", 16}, {"activation", "relu"}}, "dense"));
  ls.push_back(L("Dense", {{"units", 2}, {"activation", "softmax"}}, "dense_1"));
  auto m = Model::sequential("mlp", Shape{2}, std::move(ls));
  Network net(m, 32,
              TrainSpec{parse_loss("sparse_categorical_crossentropy"),
                        parse_optimizer(Json{{"Adam", {{"learning_rate", 0.01}}}})});
  Rng rng(3);
  net.initialize(rng);
  std::vector<int32_t> labels(32);
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    for (int i = 0; i < 32; ++i) {
      const float a = rng.uniform() * 2 - 1, b = rng.uniform() * 2 - 1;
      net.input()[2 * i] = a;
      net.input()[2 * i + 1] = b;
      labels[static_cast<size_t>(i)] = a + b > 0 ? 1 : 0;
    }
    Targets t;
    t.labels = labels.data();
    const double l = net.train_step(32, t);
    if (step == 0) first = l;
    last = l;
  }
  EXPECT_LT(last, 0.2 * first);
}

TEST(Network, GraphModelWithAddAndConcatenateTrains) {
  // input -> dense_a -> add(dense_a, dense_b(input)) -> concat(add, input) -> dense_out
  std::vector<ModelNode> nodes;
  nodes.push_back({L("Dense", {{"units", 4}, {"activation", "tanh"}}, "a"), {0}});
  nodes.push_back({L("Dense", {{"units", 4}}, "b"), {0}});
  nodes.push_back({L("Add", Json::object(), "add"), {1, 2}});
  nodes.push_back({L("Concatenate", Json::object(), "cat"), {3, 0}});
  nodes.push_back({L("Dense", {{"units", 1}}, "out"), {4}});
  auto m = std::make_shared<const Model>("graph", Shape{3}, std::move(nodes), 5);
  EXPECT_FALSE(m->is_sequential());
  EXPECT_EQ(m->planned(3).out_shape, (Shape{7}));
  Network net(
      m, 8,
      TrainSpec{parse_loss("mse"), parse_optimizer(Json{{"SGD", {{"learning_rate", 0.05}}}})});
  Rng rng(5);
  net.initialize(rng);
  std::vector<float> y(8);
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    for (int i = 0; i < 8; ++i) {
      float s = 0;
      for (int j = 0; j < 3; ++j) s += (net.input()[3 * i + j] = rng.uniform() - 0.5f) * (j + 1);
      y[static_cast<size_t>(i)] = s;
    }
    Targets t;
    t.values = y.data();
    const double l = net.train_step(8, t);
    if (step == 0) first = l;
    last = l;
  }
  EXPECT_LT(last, 0.1 * first);
}

TEST(Network, SharedParametersServeSeveralInferenceNetworks) {
  auto m = cnn();
  Network owner(m, 4);
  Rng rng(9);
  owner.initialize(rng);
  Network a(m, 4, owner.params()), b(m, 2, owner.params());
  for (int i = 0; i < 64; ++i) a.input()[i] = b.input()[i] = owner.input()[i] = rng.uniform();
  owner.forward(1, false);
  a.forward(1, false);
  b.forward(1, false);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(a.output()[k], owner.output()[k]);
    EXPECT_EQ(b.output()[k], owner.output()[k]);
  }
}

}  // namespace
}  // namespace nnfleet

namespace nnfleet {
namespace {

// wide [2] and deep [3] -> d = Dense(4, tanh)(deep) -> main = Dense(1)(concat(wide, d)),
// aux = Dense(1)(d): the shape of the Keras wide & deep model (ids 0, 1 are the inputs).
std::shared_ptr<const Model> wide_deep() {
  std::vector<ModelNode> nodes;
  nodes.push_back({L("Dense", {{"units", 4}, {"activation", "tanh"}}, "d"), {1}});
  nodes.push_back({L("Concatenate", Json::object(), "cat"), {0, 2}});
  nodes.push_back({L("Dense", {{"units", 1}}, "main"), {3}});
  nodes.push_back({L("Dense", {{"units", 1}}, "aux"), {2}});
  return std::make_shared<const Model>(
      "wd", std::vector<ModelInput>{{"wide", Shape{2}}, {"deep", Shape{3}}}, std::move(nodes),
      std::vector<int>{4, 5});
}

TrainSpec two_losses(double w_main, double w_aux) {
  TrainSpec s{parse_loss("mse"), parse_optimizer(Json{{"SGD", {{"learning_rate", 0.05}}}})};
  s.outputs = {{parse_loss("mse"), w_main}, {parse_loss("mae"), w_aux}};
  return s;
}

// Fills both inputs and both targets of a batch of 8 from rng.
void fill_batch(Network& net, Rng& rng, std::vector<float>& y0, std::vector<float>& y1) {
  for (int i = 0; i < 8; ++i) {
    float s = 0;
    for (int j = 0; j < 2; ++j) s += net.input(0)[2 * i + j] = rng.uniform() - 0.5f;
    for (int j = 0; j < 3; ++j) s -= net.input(1)[3 * i + j] = rng.uniform() - 0.5f;
    y0[static_cast<size_t>(i)] = s;
    y1[static_cast<size_t>(i)] = 0.5f * s;
  }
}

TEST(Model, SeveralInputsAndOutputsArePlannedInOrder) {
  auto m = wide_deep();
  EXPECT_EQ(m->num_inputs(), 2u);
  EXPECT_EQ(m->input(1).name, "deep");
  EXPECT_EQ(m->num_outputs(), 2u);
  EXPECT_EQ(m->output_name(0), "main");
  EXPECT_EQ(m->output_name(1), "aux");
  EXPECT_EQ(m->planned(1).out_shape, (Shape{6}));  // concat(wide [2], d [4])
  EXPECT_FALSE(m->is_sequential());
  EXPECT_EQ(m->node_name(1), "deep");
  EXPECT_EQ(m->node_name(3), "cat");
}

TEST(Model, ALayerThatFeedsNoOutputIsRefused) {
  std::vector<ModelNode> nodes;
  nodes.push_back({L("Dense", {{"units", 4}}, "dead"), {0}});
  nodes.push_back({L("Dense", {{"units", 1}}, "out"), {1}});
  try {
    Model("m", std::vector<ModelInput>{{"a", Shape{3}}, {"b", Shape{2}}}, std::move(nodes),
          std::vector<int>{3});
    FAIL() << "expected a ModelError";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'dead' does not lead to an output"),
              std::string::npos)
        << e.what();
  }
}

// The training loss is the weighted sum of the outputs' mean losses (Keras's loss_weights), each
// output's own losses are kept, and an output of weight 0 sends no gradient into its head.
TEST(Network, TwoOutputLossIsTheWeightedSumAndWeightsScaleGradients) {
  Network net(wide_deep(), 8, two_losses(0.9, 0.1));
  Rng rng(3);
  net.initialize(rng);
  std::vector<float> y0(8), y1(8);
  fill_batch(net, rng, y0, y1);
  Targets t[2];
  t[0].values = y0.data();
  t[1].values = y1.data();
  const double total = net.train_step(8, t);
  double l0 = 0, l1 = 0;
  for (int i = 0; i < 8; ++i) {
    l0 += net.step_losses(0)[i];
    l1 += net.step_losses(1)[i];
  }
  EXPECT_NEAR(total, 0.9 * l0 / 8 + 0.1 * l1 / 8, 1e-6);
  EXPECT_GT(l1, 0.0);

  Network frozen_aux(wide_deep(), 8, two_losses(1.0, 0.0));
  Rng rng2(3);
  frozen_aux.initialize(rng2);
  fill_batch(frozen_aux, rng2, y0, y1);
  frozen_aux.train_step(8, t);
  // Layer 'aux' (layer 3) holds the last trainable parameters: kernel [4,1] and bias [1].
  const float* g = frozen_aux.gradients();
  for (size_t i = frozen_aux.num_trainable() - 5; i < frozen_aux.num_trainable(); ++i)
    EXPECT_EQ(g[i], 0.0f) << i;
  EXPECT_NE(g[0], 0.0f);  // 'd' still learns from main
}

TEST(Network, TwoInputTwoOutputModelTrainsSplitOrWholeAlike) {
  Network whole(wide_deep(), 8, two_losses(0.9, 0.1));
  Network split(wide_deep(), 8, two_losses(0.9, 0.1), 2);
  ASSERT_EQ(split.pieces(), 2);
  Rng r1(11), r2(11);
  whole.initialize(r1);
  split.initialize(r2);
  std::vector<float> y0(8), y1(8);
  Targets t[2];
  t[0].values = y0.data();
  t[1].values = y1.data();
  double first = 0, last = 0;
  Rng data(7);
  for (int step = 0; step < 300; ++step) {
    fill_batch(whole, data, y0, y1);
    std::copy(whole.input(0), whole.input(0) + 16, split.input(0));
    std::copy(whole.input(1), whole.input(1) + 24, split.input(1));
    const double lw = whole.train_step(8, t), ls = split.train_step(8, t);
    ASSERT_NEAR(lw, ls, 1e-5) << step;
    if (step == 0) first = lw;
    last = lw;
  }
  EXPECT_LT(last, 0.2 * first);
  for (size_t j = 0; j < 2; ++j)
    for (int i = 0; i < 8; ++i) EXPECT_NEAR(split.output(j)[i], whole.output(j)[i], 1e-4);
  const long before = allocation_count();
  for (int s = 0; s < 3; ++s) split.train_step(s % 2 ? 8 : 5, t);
  EXPECT_EQ(allocation_count() - before, 0);
}

// A seq2seq model as Keras's lstm_seq2seq builds it: the encoder returns its states (outputs 1
// and 2 of its node), which start the decoder; the Dense reads the decoder's sequence.
std::shared_ptr<const Model> seq2seq(const char* cell) {
  const bool lstm = std::string(cell) == "LSTM";
  std::vector<ModelNode> nodes;
  nodes.push_back({L(cell, {{"units", 3}, {"return_state", true}}, "encoder"), {0}});
  std::vector<int> dec_in{1, 2, 2}, dec_tensors{0, 1, 2};
  if (!lstm) dec_in.pop_back(), dec_tensors.pop_back();
  nodes.push_back(
      {L(cell, {{"units", 3}, {"return_sequences", true}}, "decoder"), dec_in, {}, dec_tensors});
  nodes.push_back({L("Dense", {{"units", 2}}, "dense"), {3}});
  return std::make_shared<const Model>(
      "s2s", std::vector<ModelInput>{{"enc", Shape{4, 3}}, {"dec", Shape{5, 2}}}, std::move(nodes),
      std::vector<int>{4});
}

// Freezing layers rebuilds the model with the same graph: the decoder still reads the encoder's
// states, not its output.
TEST(Model, WithFrozenKeepsWhichOutputEachInputIs) {
  const auto m = seq2seq("LSTM")->with_frozen({true, false, false});
  EXPECT_EQ(m->input_tensor(1, 1), 1);
  EXPECT_EQ(m->input_tensor(1, 2), 2);
  EXPECT_EQ(m->planned(1).in_shapes[1], (Shape{3}));
}

// d loss / d param by central differences (step 1e-2), the parameter restored afterwards.
template <class Loss>
double central_difference(float& param, const Loss& loss) {
  const float h = 1e-2f, orig = param;
  param = orig + h;
  const double up = loss();
  param = orig - h;
  const double down = loss();
  param = orig;
  return (up - down) / (2.0 * h);
}

// The training step's gradients, the encoder's included (which reach it only through the states
// the decoder starts from), match central differences of the mean loss.
TEST(Network, Seq2SeqGradientsReachTheEncoderThroughItsStates) {
  for (const char* cell : {"LSTM", "GRU", "SimpleRNN"}) {
    const auto m = seq2seq(cell);
    ASSERT_EQ(m->planned(0).extra_out_shapes.size(), std::string(cell) == "LSTM" ? 2u : 1u);
    const TrainSpec spec{parse_loss("mean_squared_error"), parse_optimizer("sgd")};
    Network net(m, 3, spec);
    Rng rng(21);
    net.initialize(rng);
    for (int i = 0; i < 3 * 12; ++i) net.input(0)[i] = rng.uniform() * 2 - 1;
    for (int i = 0; i < 3 * 10; ++i) net.input(1)[i] = rng.uniform() * 2 - 1;
    std::vector<float> y(3 * 10);
    for (auto& v : y) v = rng.uniform();
    Targets t;
    t.values = y.data();
    const std::vector<float> p0(net.params(), net.params() + net.num_params());
    net.train_step(3, t);
    const std::vector<float> g(net.gradients(), net.gradients() + net.num_trainable());
    std::copy(p0.begin(), p0.end(), net.params());
    const LossSpec& loss = spec.loss;
    auto mean_loss = [&] { return net.evaluate_batch(3, loss, t, nullptr) / 3.0; };
    // The encoder's weights come first: kernel [3,GU], recurrent kernel [3,GU], bias.
    const size_t gates = std::string(cell) == "LSTM" ? 4 : std::string(cell) == "GRU" ? 3 : 1;
    const size_t encoder = (3 + 3 + (gates == 3 ? 2 : 1)) * 3 * gates;
    double encoder_norm = 0;
    for (size_t i = 0; i < net.num_trainable(); ++i) {
      const double numeric = central_difference(net.params()[i], mean_loss);
      EXPECT_NEAR(g[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << cell << " param " << i;
      if (i < encoder) encoder_norm += std::fabs(g[i]);
    }
    EXPECT_GT(encoder_norm, 1e-3) << cell;
  }
}

// Keras's encoder model Model(inp, [out, h, c]): the outputs are outputs 0, 1 and 2 of one LSTM
// node, named as tf.keras makes them unique. Each has its own loss; the states' gradients reach
// the LSTM through its extra outputs and match central differences of the total loss.
TEST(Network, ReturnedStatesAsModelOutputsPredictAndTrain) {
  std::vector<ModelNode> nodes;
  nodes.push_back(
      {L("LSTM", {{"units", 3}, {"return_sequences", true}, {"return_state", true}}, "encoder"),
       {0}});
  const auto m = std::make_shared<const Model>("enc", std::vector<ModelInput>{{"x", Shape{4, 2}}},
                                               std::move(nodes), std::vector<int>{1, 1, 1},
                                               std::vector<int>{0, 1, 2});
  ASSERT_EQ(m->num_outputs(), 3u);
  EXPECT_EQ(m->output_name(0), "encoder");
  EXPECT_EQ(m->output_name(1), "encoder_1");
  EXPECT_EQ(m->output_name(2), "encoder_2");
  EXPECT_EQ(m->output_shape(0), (Shape{4, 3}));
  EXPECT_EQ(m->output_shape(2), (Shape{3}));
  EXPECT_EQ(m->output_tensor(2), 2);
  const TrainSpec spec{parse_loss("mean_squared_error"), parse_optimizer("sgd")};
  Network net(m, 3, spec);
  Rng rng(17);
  net.initialize(rng);
  for (int i = 0; i < 3 * 8; ++i) net.input(0)[i] = rng.uniform() * 2 - 1;
  // Prediction: h is the sequence's last step.
  net.forward(3, false);
  for (int r = 0; r < 3; ++r)
    for (int u = 0; u < 3; ++u) EXPECT_EQ(net.output(1)[r * 3 + u], net.output(0)[r * 12 + 9 + u]);
  std::vector<float> y0(3 * 12), y1(3 * 3), y2(3 * 3);
  for (auto* y : {&y0, &y1, &y2})
    for (float& v : *y) v = rng.uniform();
  Targets t[3];
  t[0].values = y0.data();
  t[1].values = y1.data();
  t[2].values = y2.data();
  const std::vector<float> p0(net.params(), net.params() + net.num_params());
  net.train_step(3, t);
  const std::vector<float> g(net.gradients(), net.gradients() + net.num_trainable());
  std::copy(p0.begin(), p0.end(), net.params());
  auto mean_loss = [&] {
    net.forward(3, false);
    double sums[3];
    return net.output_losses(3, t, sums) / 3.0;
  };
  double c_norm = 0;
  for (size_t i = 0; i < net.num_trainable(); ++i) {
    const double numeric = central_difference(net.params()[i], mean_loss);
    EXPECT_NEAR(g[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "param " << i;
    c_norm += std::fabs(g[i]);
  }
  EXPECT_GT(c_norm, 1e-3);
}

// Output (layer, tensor) pairs are distinct and name an output the layer has.
TEST(Model, StateOutputsMustBeDistinctAndExist) {
  for (const auto& [tensors, want] : std::vector<std::pair<std::vector<int>, std::string>>{
           {{1, 1}, "output 1 of layer 'encoder' is given twice"},
           {{0, 3}, "output 1 is output 3 of layer 'encoder', which has 3; expected 0 to 2"}}) {
    std::vector<ModelNode> nodes;
    nodes.push_back({L("LSTM", {{"units", 3}, {"return_state", true}}, "encoder"), {0}});
    try {
      Model("m", std::vector<ModelInput>{{"x", Shape{4, 2}}}, std::move(nodes),
            std::vector<int>{1, 1}, tensors);
      ADD_FAILURE() << "expected a ModelError";
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace nnfleet
