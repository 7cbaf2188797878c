// w3_pack_bench: W3's 120 MLPs (workloads.md) trained one model at a time, as the fleet does,
// against the same models trained in packs whose first Dense layers are one wide product
// (model/dense_pack.h, bit-identical results). Rounds interleave the two paths (alone, packed,
// alone, ...) on one thread; each figure is the median over rounds of the training GFLOP/s,
// counted as bench/peers/workloads.py counts W3 (3 x 2 x the Dense multiply-adds per sample),
// over the thread's CPU time (the machine may be shared) and over wall time.
//
//   build/bench/model/w3_pack_bench [--epochs E] [--rounds R] [--pack G]...
// --pack G: packs of G consecutive models of the grid (width-major, then activation, then
// learning rate; G = 6: one width and depth, all activations and rates), repeatable.
// The inputs are random digits-like rows (0..16 over 16) and labels; a step's cost does not
// depend on the values.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "layers/registry.h"
#include "model/dense_pack.h"

namespace nnfleet {
namespace {

constexpr int kFeatures = 64, kRows = 1437;  // digits' training rows (workloads.md)

struct Grid {
  std::vector<std::shared_ptr<const Model>> models;
  std::vector<TrainSpec> train;
  std::vector<double> flops;  // per sample, training
};

// W3's 60 models of one batch size, in the order examples/w3.yaml's grid lists them.
Grid w3_grid() {
  Grid g;
  for (int depth : {1, 2})
    for (int width : {8, 16, 32, 64, 128})
      for (const char* act : {"relu", "tanh"})
        for (double lr : {1e-3, 3e-3, 1e-2}) {
          std::vector<std::unique_ptr<Layer>> ls;
          for (int d = 0; d < depth; ++d)
            ls.push_back(make_layer("Dense", {{"units", width}, {"activation", act}},
                                    ConfigMode::kPlan, "dense_" + std::to_string(d)));
          ls.push_back(make_layer("Dense", {{"units", 10}, {"activation", "softmax"}},
                                  ConfigMode::kPlan, "out"));
          g.models.push_back(Model::sequential("w3", Shape{kFeatures}, std::move(ls)));
          g.train.push_back(
              {parse_loss("sparse_categorical_crossentropy"),
               parse_optimizer(Json{{"Adam", {{"learning_rate", lr}, {"epsilon", 1e-7}}}})});
          const double macs = kFeatures * width + (depth - 1.0) * width * width + 10.0 * width;
          g.flops.push_back(6.0 * macs);
        }
  return g;
}

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Data {
  std::vector<float> x;
  std::vector<int32_t> y;
};

// Trains models [first, last) of `nets` for `epochs` on `data` in unshuffled batches: one pack
// when last - first > 1, else the model alone.
void train_group(std::vector<Network>& nets, size_t first, size_t last, int batch, int epochs,
                 const Data& data) {
  std::vector<Network*> members;
  for (size_t k = first; k < last; ++k) members.push_back(&nets[k]);
  std::vector<char> active(members.size(), 1);
  std::vector<double> losses(members.size());
  std::vector<Targets> targets(members.size());
  std::vector<const Targets*> tp;
  for (Targets& t : targets) tp.push_back(&t);
  std::unique_ptr<DensePack> pack;
  if (members.size() > 1) pack = std::make_unique<DensePack>(members);
  for (int e = 0; e < epochs; ++e)
    for (int b = 0; b < kRows; b += batch) {
      const int n = std::min(batch, kRows - b);
      const float* x = data.x.data() + static_cast<size_t>(b) * kFeatures;
      for (Targets& t : targets) t.labels = data.y.data() + b;
      if (pack) {
        pack->train_step(n, x, tp.data(), active.data(), losses.data());
        continue;
      }
      std::memcpy(members[0]->input(), x, sizeof(float) * static_cast<size_t>(n) * kFeatures);
      losses[0] = members[0]->train_step(n, targets[0]);
    }
}

struct Rate {
  double cpu = 0, wall = 0;  // GFLOP/s
};

// W3's models of one batch size, in groups of `group` (1: alone), freshly initialized.
Rate run(const Grid& g, int batch, int epochs, size_t group, const Data& data) {
  std::vector<Network> nets;
  nets.reserve(g.models.size());
  double flops = 0;
  for (size_t k = 0; k < g.models.size(); ++k) {
    nets.emplace_back(g.models[k], batch, g.train[k]);
    Rng init(k);
    nets.back().initialize(init);
    flops += g.flops[k] * kRows * epochs;
  }
  const double c0 = cpu_seconds();
  const auto w0 = std::chrono::steady_clock::now();
  for (size_t first = 0; first < nets.size(); first += group)
    train_group(nets, first, std::min(nets.size(), first + group), batch, epochs, data);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  return {flops / (cpu_seconds() - c0) / 1e9, flops / wall / 1e9};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace
}  // namespace nnfleet

int main(int argc, char** argv) {
  using namespace nnfleet;
  int epochs = 30, rounds = 3;
  std::vector<size_t> packs;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--epochs")
      epochs = v;
    else if (a == "--rounds")
      rounds = v;
    else if (a == "--pack")
      packs.push_back(static_cast<size_t>(v));
  }
  if (packs.empty()) packs = {6, 60};
  const Grid g = w3_grid();
  Data data;
  Rng r(1);
  for (int i = 0; i < kRows * kFeatures; ++i)
    data.x.push_back(static_cast<float>(r.below(17)) / 16);
  for (int i = 0; i < kRows; ++i) data.y.push_back(static_cast<int32_t>(r.below(10)));
  std::printf("W3 training, 1 thread, %d epochs, medians of %d interleaved rounds\n", epochs,
              rounds);
  std::printf("%-6s %-10s %18s %18s %14s\n", "batch", "path", "GFLOP/s (cpu)", "GFLOP/s (wall)",
              "packed/alone");
  for (int batch : {16, 32}) {
    std::vector<std::vector<double>> cpu(packs.size() + 1), wall(packs.size() + 1);
    for (int round = 0; round < rounds; ++round)
      for (size_t p = 0; p <= packs.size(); ++p) {
        const Rate rate = run(g, batch, epochs, p == 0 ? 1 : packs[p - 1], data);
        cpu[p].push_back(rate.cpu);
        wall[p].push_back(rate.wall);
      }
    for (size_t p = 0; p <= packs.size(); ++p) {
      const std::string path = p == 0 ? "alone" : "pack " + std::to_string(packs[p - 1]);
      std::printf("%-6d %-10s %18.1f %18.1f %14.2f\n", batch, path.c_str(), median(cpu[p]),
                  median(wall[p]), median(cpu[p]) / median(cpu[0]));
    }
  }
  return 0;
}
