// The training Network's memory plan: activation gradients share blocks when their lifetimes do
// not overlap (model/buffer_plan.h, model/network_plan.cpp), and Flatten/Reshape are views. The
// results must be bit-identical to a naive trainer with one zeroed gradient buffer per node and
// every layer run (the plan before the sharing), and m7's arena must hold only what is live.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "layers/registry.h"
#include "model/buffer_plan.h"
#include "model/network.h"
#include "tensor/arena.h"

namespace nnfleet {
namespace {

std::unique_ptr<Layer> L(const char* cls, Json cfg, const char* name) {
  return make_layer(cls, cfg, ConfigMode::kPlan, name);
}

TEST(BufferPlan, DisjointLifetimesShareAndOverlappingOnesDoNot) {
  // a [0,1] and b [1,2] overlap at step 1; c [3,4] overlaps neither and takes a's space.
  size_t total = 0;
  const auto off = place_buffers({{100, 0, 1}, {40, 1, 2}, {90, 3, 4}}, 16, &total);
  EXPECT_EQ(off[0], 0u);
  EXPECT_EQ(off[1], 112u);  // after a, rounded to 16 floats
  EXPECT_EQ(off[2], 0u);
  EXPECT_EQ(total, 112u + 48u);
}

TEST(BufferPlan, NoTwoLiveBuffersOverlapOverRandomPlans) {
  Rng rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferLife> b(1 + rng.below(12));
    for (BufferLife& x : b) {
      x.floats = rng.below(300);
      x.first = static_cast<int>(rng.below(10)) - 1;
      x.last = x.first + static_cast<int>(rng.below(5));
    }
    size_t total = 0;
    const auto off = place_buffers(b, 16, &total);
    size_t peak = 0;  // the most floats live at one step: a lower bound of total
    for (int s = -1; s < 14; ++s) {
      size_t live = 0;
      for (const BufferLife& x : b)
        if (x.first <= s && s <= x.last) live += (x.floats + 15) / 16 * 16;
      peak = std::max(peak, live);
    }
    EXPECT_GE(total, peak);
    for (size_t i = 0; i < b.size(); ++i) {
      EXPECT_EQ(off[i] % 16, 0u);
      EXPECT_LE(off[i] + b[i].floats, total);
      for (size_t j = i + 1; j < b.size(); ++j) {
        const bool live_together = b[i].first <= b[j].last && b[j].first <= b[i].last;
        const bool share = off[i] < off[j] + b[j].floats && off[j] < off[i] + b[i].floats;
        EXPECT_FALSE(live_together && share && b[i].floats && b[j].floats) << trial;
      }
    }
  }
}

// m7 of examples/w1.yaml (W1's largest model), without its Dropouts when `dropout` is false.
std::shared_ptr<const Model> m7(bool dropout) {
  std::vector<std::unique_ptr<Layer>> ls;
  ls.push_back(L("Conv2D", {{"filters", 32}, {"kernel_size", 3}, {"activation", "relu"}}, "c1"));
  ls.push_back(L("Conv2D", {{"filters", 64}, {"kernel_size", 3}, {"activation", "relu"}}, "c2"));
  ls.push_back(L("MaxPooling2D", {{"pool_size", 2}}, "pool"));
  if (dropout) ls.push_back(L("Dropout", {{"rate", 0.25}}, "drop"));
  ls.push_back(L("Flatten", Json::object(), "flatten"));
  ls.push_back(L("Dense", {{"units", 128}, {"activation", "relu"}}, "d1"));
  if (dropout) ls.push_back(L("Dropout", {{"rate", 0.5}}, "drop_1"));
  ls.push_back(L("Dense", {{"units", 10}, {"activation", "softmax"}}, "d2"));
  return Model::sequential("m7", Shape{28, 28, 1}, std::move(ls));
}

// A small graph: a Flatten view read by two layers, a Reshape view of a Flatten view, a Flatten
// straight off the model input, a three-input Add, and a Flatten of a tensor another layer also
// reads (not a view: its input's gradient would sum in another order).
std::shared_ptr<const Model> branchy() {
  const Json conv = {
      {"filters", 3}, {"kernel_size", 3}, {"padding", "same"}, {"activation", "tanh"}};
  std::vector<ModelNode> nodes;  // ids: 0 the input [4,4,2], then the layers (layer = id - 1)
  nodes.push_back({L("Conv2D", conv, "c"), {0}});                                         // 1
  nodes.push_back({L("Flatten", Json::object(), "f"), {1}});                              // 2
  nodes.push_back({L("Dense", {{"units", 6}, {"activation", "tanh"}}, "a"), {2}});        // 3
  nodes.push_back({L("Dense", {{"units", 6}}, "b"), {2}});                                // 4
  nodes.push_back({L("Conv2D", conv, "c2"), {0}});                                        // 5
  nodes.push_back({L("Reshape", {{"target_shape", {16, 3}}}, "r"), {5}});                 // 6
  nodes.push_back({L("Flatten", Json::object(), "f2"), {6}});                             // 7
  nodes.push_back({L("Dense", {{"units", 6}}, "e"), {7}});                                // 8
  nodes.push_back({L("Flatten", Json::object(), "fa"), {3}});                             // 9
  nodes.push_back({L("Add", Json::object(), "add"), {9, 4, 8}});                          // 10
  nodes.push_back({L("Flatten", Json::object(), "fin"), {0}});                            // 11
  nodes.push_back({L("Dense", {{"units", 6}}, "g"), {11}});                               // 12
  nodes.push_back({L("Concatenate", Json::object(), "cat"), {10, 12, 3}});                // 13
  nodes.push_back({L("Dense", {{"units", 3}, {"activation", "softmax"}}, "out"), {13}});  // 14
  return std::make_shared<const Model>("branchy", Shape{4, 4, 2}, std::move(nodes), 14);
}

// Naive training, as the Network did before its gradient blocks were shared: one buffer per
// node output and per node gradient, every gradient zeroed each step, every layer run (views
// too). Same parameters (copied from `net` after initialize), same optimizer calls.
class NaiveTrainer {
 public:
  NaiveTrainer(const Model& m, const Network& net, int max_batch, const TrainSpec& spec)
      : m_(m),
        spec_(spec),
        params_(net.params(), net.params() + net.num_params()),
        grads_(net.num_trainable()),
        state_(optimizer_state_floats(spec.optimizer, net.num_trainable())) {
    optimizer_init_state(spec.optimizer, grads_.size(), state_.data());
    const size_t n = m.num_layers();
    y_.resize(n), dy_.resize(n), cache_.resize(n), pp_.resize(n), gp_.resize(n);
    size_t scratch = 0;
    for (size_t i = 0; i < n; ++i) {
      const PlannedNode& p = m.planned(i);
      y_[i].resize(static_cast<size_t>(max_batch * p.out_shape.size()));
      dy_[i].resize(y_[i].size());
      cache_[i].resize(m.layer(i).cache_floats(p.in_shapes, max_batch));
      scratch = std::max(scratch, m.layer(i).scratch_floats(p.in_shapes, max_batch));
      for (size_t j = 0; j < p.params.size(); ++j) {
        const size_t off = static_cast<size_t>(net.param(i, j) - net.params());
        pp_[i].push_back(params_.data() + off);
        if (p.params[j].trainable) gp_[i].push_back(grads_.data() + off);
      }
    }
    scratch_.resize(scratch);
    input_.resize(static_cast<size_t>(max_batch * m.input(0).shape.size()));
  }
  float* input() { return input_.data(); }
  const std::vector<float>& params() const { return params_; }

  void step(int n, const Targets& t) {
    std::fill(grads_.begin(), grads_.end(), 0.0f);
    for (auto& d : dy_) std::fill(d.begin(), d.end(), 0.0f);
    for (size_t i = 0; i < m_.num_layers(); ++i) m_.layer(i).forward(args(i, n));
    const size_t out = m_.layer_of(m_.output_node());
    const int k = static_cast<int>(m_.output_shape().size());
    std::vector<float> per_sample(static_cast<size_t>(n));
    loss_forward(spec_.loss, n, k, y_[out].data(), t, per_sample.data());
    loss_backward(spec_.loss, n, k, y_[out].data(), t, dy_[out].data(), n);
    for (size_t i = m_.num_layers(); i-- > 0;) {
      LayerArgs a = args(i, n);
      a.dy = dy_[i].data();
      a.dx = dx_.data();
      a.dparams = gp_[i].data();
      m_.layer(i).backward(a);
    }
    optimizer_update(spec_.optimizer, iteration_++, grads_.size(), params_.data(), grads_.data(),
                     state_.data(), 0, grads_.size());
  }

 private:
  LayerArgs args(size_t i, int n) {
    const PlannedNode& p = m_.planned(i);
    x_.clear(), dx_.clear();
    for (int id : m_.layer_inputs(i)) {
      x_.push_back(m_.is_input(id) ? input_.data() : y_[m_.layer_of(id)].data());
      dx_.push_back(m_.is_input(id) ? nullptr : dy_[m_.layer_of(id)].data());
    }
    LayerArgs a;
    a.n = n;
    a.training = true;
    a.n_inputs = static_cast<int>(x_.size());
    a.in_shapes = p.in_shapes.data();
    a.out_shape = p.out_shape;
    a.x = x_.data();
    a.y = y_[i].data();
    a.params = pp_[i].data();
    a.cache = cache_[i].data();
    a.scratch = scratch_.data();
    return a;
  }
  const Model& m_;
  TrainSpec spec_;
  std::vector<float> params_, grads_, state_, scratch_, input_;
  std::vector<std::vector<float>> y_, dy_, cache_;
  std::vector<std::vector<float*>> pp_, gp_;
  std::vector<const float*> x_;
  std::vector<float*> dx_;
  int64_t iteration_ = 0;
};

TEST(NetworkPlan, SharedGradientBlocksTrainBitForBitAsOneBufferPerNode) {
  for (const auto& model : {m7(false), branchy()}) {
    SCOPED_TRACE(model->name());
    const TrainSpec spec{parse_loss("sparse_categorical_crossentropy"), parse_optimizer("adam")};
    const int batch = 8;
    Network net(model, batch, spec);
    Rng init(11), data(12);
    net.initialize(init);
    NaiveTrainer naive(*model, net, batch, spec);
    const size_t in = static_cast<size_t>(model->input(0).shape.size());
    std::vector<int32_t> labels(batch);
    for (int s = 0; s < 4; ++s) {
      const int n = s == 2 ? 3 : batch;  // a short batch: blocks are zeroed for its rows only
      for (size_t i = 0; i < static_cast<size_t>(n) * in; ++i)
        net.input()[i] = naive.input()[i] = data.uniform();
      for (int i = 0; i < n; ++i)
        labels[static_cast<size_t>(i)] = static_cast<int32_t>(data.below(3));
      Targets t;
      t.labels = labels.data();
      net.train_step(n, t);
      naive.step(n, t);
    }
    ASSERT_EQ(naive.params().size(), net.num_params());
    EXPECT_EQ(std::memcmp(naive.params().data(), net.params(), net.num_params() * sizeof(float)),
              0);
  }
}

TEST(NetworkPlan, FlattenAndReshapeAreViewsOfTheirInput) {
  const auto m = branchy();
  for (bool train : {false, true}) {
    const TrainSpec spec{parse_loss("sparse_categorical_crossentropy"), parse_optimizer("sgd")};
    Network net = train ? Network(m, 4, spec) : Network(m, 4);
    EXPECT_EQ(net.layer_output(1), net.layer_output(0));  // f = c
    EXPECT_EQ(net.layer_output(5), net.layer_output(4));  // r = c2
    EXPECT_EQ(net.layer_output(6), net.layer_output(4));  // f2 = r
    EXPECT_EQ(net.layer_output(10), net.input());         // fin = the model input
    EXPECT_NE(net.layer_output(8), net.layer_output(2));  // fa copies a, which cat also reads
  }
}

// Bytes of a region as the arena reserves it (rounded up to 64 bytes).
size_t region(size_t floats) { return (floats + 15) / 16 * 16 * sizeof(float); }

// m7 at W1's batch of 32: the activation gradients take the two largest live at once (c1's and
// c2's, both live during c2's backward), not all seven, and Flatten holds no copy.
TEST(NetworkPlan, M7ArenaHoldsOnlyTheLiveGradientsAndNoFlattenCopy) {
  const auto m = m7(true);
  const TrainSpec spec{parse_loss("sparse_categorical_crossentropy"), parse_optimizer("adam")};
  const size_t B = 32;
  size_t params = 0, trainable = 0, ys = 0, all_ys = 0, caches = 0, scratch = 0, dys = 0;
  size_t scratch_copying_dy = 0;
  for (size_t i = 0; i < m->num_layers(); ++i) {
    const PlannedNode& p = m->planned(i);
    for (const ParamSpec& s : p.params) {
      params += static_cast<size_t>(s.shape.size());
      if (s.trainable) trainable += static_cast<size_t>(s.shape.size());
    }
    const size_t y = region(B * static_cast<size_t>(p.out_shape.size()));
    all_ys += y;
    dys += y;
    if (m->layer(i).class_name() != std::string("Flatten")) ys += y;
    caches += region(m->layer(i).cache_floats(p.in_shapes, static_cast<int>(B)));
    // Every node trains: each backward may write over its own dy (Layer::scratch_floats_owning_dy).
    scratch =
        std::max(scratch, m->layer(i).scratch_floats_owning_dy(p.in_shapes, static_cast<int>(B)));
    scratch_copying_dy =
        std::max(scratch_copying_dy, m->layer(i).scratch_floats(p.in_shapes, static_cast<int>(B)));
  }
  // c2's ReLU gradient [B, 24, 24, 64] goes over its dy, not into the scratch.
  EXPECT_GE(scratch_copying_dy, scratch + B * 24 * 24 * 64);
  const size_t fixed = region(params) + region(trainable) +
                       region(optimizer_state_floats(spec.optimizer, trainable)) +
                       region(B * 28 * 28) + caches + region(scratch) + region(B);
  const size_t live_dy = region(B * 26 * 26 * 32) + region(B * 24 * 24 * 64);
  const size_t got = Network::estimate_bytes(m, static_cast<int>(B), spec);
  EXPECT_EQ(got, fixed + ys + live_dy);
  EXPECT_EQ(Network(m, static_cast<int>(B), spec).arena_bytes(), got);
  // One gradient buffer per node and a Flatten copy took 4.75 MB more: the gradients of pool,
  // drop, flatten (3 x 9216 floats a sample), d1 and drop_1 (2 x 128) and d2 (10), and flatten's
  // copy of its input (9216), at 32 samples.
  const size_t per_node = fixed + all_ys + dys;
  EXPECT_EQ(per_node - got, (32 * (4 * 9216 + 2 * 128) + 320) * sizeof(float));
}

// A batch near 2^31 split in two overflowed int in Network::plan (max_batch + pieces - 1): a
// SIGSEGV at 2^31 - 1, a std::length_error at 1.5e9. Planned in 64 bits, without allocating.
TEST(NetworkPlan, BatchNear2To31IsPlannedIn64Bits) {
  std::vector<std::unique_ptr<Layer>> ls;
  ls.push_back(L("Dense", {{"units", 3}, {"activation", "softmax"}}, "d"));
  const auto m = Model::sequential("tiny", Shape{2}, std::move(ls));
  const TrainSpec spec{parse_loss("sparse_categorical_crossentropy"), parse_optimizer("sgd")};
  for (int batch : {INT_MAX, 1'500'000'000}) {
    const size_t one = Network::estimate_bytes(m, batch, spec, 1);
    const size_t two = Network::estimate_bytes(m, batch, spec, 2);
    // At least the input, the output and the per-sample loss of every row.
    EXPECT_GE(one, size_t(batch) * (2 + 3 + 1) * sizeof(float)) << batch;
    EXPECT_GE(two, one) << batch;  // a split adds the gathered output
  }
}

// A refused allocation read "std::bad_alloc": it names the model and the bytes.
TEST(NetworkPlan, RefusedArenaNamesTheModelAndItsBytes) {
  const auto m = m7(false);
  const TrainSpec spec{parse_loss("sparse_categorical_crossentropy"), parse_optimizer("adam")};
  const size_t bytes = Network::estimate_bytes(m, 32, spec);
  set_arena_limit(static_cast<int64_t>(bytes) - 1);
  try {
    Network net(m, 32, spec);
    ADD_FAILURE() << "expected a ModelError";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("failed to allocate the memory of model 'm7': the system "
                                         "refused its weights, gradients and activations at "
                                         "batch 32; expected " +
                                         std::to_string(bytes) + " bytes"),
              std::string::npos)
        << e.what();
  }
  set_arena_limit(-1);
  EXPECT_EQ(Network(m, 32, spec).arena_bytes(), bytes);
}

// A trained network's numbers can be given back before its file's copies of them are made
// (W1's peak memory was m7's save): the arena's pages are released and read as zero, while the
// network stays usable.
TEST(NetworkPlan, DiscardedMemoryGoesBackToTheSystemAndReadsAsZero) {
  const auto m = m7(true);
  const TrainSpec spec{parse_loss("sparse_categorical_crossentropy"), parse_optimizer("adam")};
  Network net(m, 32, spec);
  // 37.6 MB (40.0 MB before c2's ReLU gradient went over its dy instead of the scratch).
  ASSERT_GT(net.arena_bytes(), size_t{32} << 20);
  // One training step first, as before any save: an arena this large is mapped zero-filled and
  // its pages become resident as a step touches them (Arena::allocate).
  Rng init(11), data(12);
  net.initialize(init);
  std::vector<int32_t> labels(32);
  for (size_t i = 0; i < static_cast<size_t>(32 * m->input(0).shape.size()); ++i)
    net.input()[i] = data.uniform();
  for (int32_t& l : labels) l = static_cast<int32_t>(data.below(10));
  Targets t;
  t.labels = labels.data();
  net.train_step(32, t);
  std::fill(net.params(), net.params() + net.num_params(), 0.5f);
  std::fill(net.optimizer_state(), net.optimizer_state() + net.optimizer_state_floats(), 0.25f);
  auto resident_kb = [] {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1L;
  };
  // The gradients, activations and scratch go first; the numbers stay.
  long before = resident_kb();
  net.discard_working_memory();
  long after = resident_kb();
  EXPECT_GE(before - after, 4000) << "the gradients alone are 1.2 M floats, 4.8 MB";
  EXPECT_TRUE(std::all_of(net.params(), net.params() + net.num_params(),
                          [](float v) { return v == 0.5f; }));
  EXPECT_TRUE(std::all_of(net.optimizer_state(),
                          net.optimizer_state() + net.optimizer_state_floats(),
                          [](float v) { return v == 0.25f; }));
  // Then the numbers, a range at a time as a file takes them.
  before = resident_kb();
  net.discard_numbers(net.params(), net.num_params());
  net.discard_numbers(net.optimizer_state(), net.optimizer_state_floats());
  after = resident_kb();
  // The parameters and the optimizer state alone are 3 x 1.2 M floats, 14.4 MB.
  EXPECT_GE(before - after, 14000) << before << " KB resident before, " << after << " after";
  // Only whole pages go: at most the two partial pages at a range's ends keep their numbers.
  auto zeros = [](const float* p, size_t n) {
    return static_cast<size_t>(std::count(p, p + n, 0.0f));
  };
  const size_t page_floats = static_cast<size_t>(sysconf(_SC_PAGESIZE)) / sizeof(float);
  EXPECT_GE(zeros(net.params(), net.num_params()), net.num_params() - 2 * page_floats);
  EXPECT_GE(zeros(net.optimizer_state(), net.optimizer_state_floats()),
            net.optimizer_state_floats() - 2 * page_floats);
  net.params()[0] = 1.0f;  // still the network's memory
  EXPECT_EQ(net.params()[0], 1.0f);
}

}  // namespace
}  // namespace nnfleet
