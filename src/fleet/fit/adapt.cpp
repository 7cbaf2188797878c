// adapt() for plans (adapt.h): Normalization's statistics from the training rows.
#include "fleet/fit/adapt.h"

#include <algorithm>

#include "layers/preprocessing.h"
#include "layers/registry.h"

namespace nnfleet {
namespace {

// Rows gathered at a time: bounds the buffer, not the result (the sums run in row order).
constexpr int kChunkRows = 256;

// Runs f(rows [n, sample], n) over the training rows of input k, in order, as the model sees them
// (data.scale applied, any dtype as float32).
template <typename F>
void over_train_rows(const FleetData& data, size_t k, F f) {
  const Array& x = data.x(k);
  const auto per = static_cast<size_t>(x.row_size());
  std::vector<float> buf(per * kChunkRows);
  std::vector<int64_t> idx(kChunkRows);
  for (int64_t r0 = 0; r0 < data.n_train; r0 += kChunkRows) {
    const int n = static_cast<int>(std::min<int64_t>(kChunkRows, data.n_train - r0));
    for (int i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = r0 + i;
    gather_rows(x, idx.data(), n, data.scale, buf.data());
    f(buf.data(), n);
  }
}

}  // namespace

std::optional<ModelSpec> adapted_spec(const ModelSpec& spec, const FleetData& data) {
  if (!spec.keras.empty() || spec.layers.empty() || spec.layers[0].class_name != "Discretization")
    return std::nullopt;
  const LayerEntry& first = spec.layers[0];
  const auto layer =
      make_layer(first.class_name, first.config, ConfigMode::kPlan, "discretization");
  if (!discretization_adapts(*layer)) return std::nullopt;
  if (data.n_train <= 0)
    throw ModelError("layer 0 '" + layer->name() +
                     "' (Discretization) adapts its bin boundaries from the training data; "
                     "expected training rows, got none (data " +
                     data.train_name + ")");
  const Json cfg = layer->keras_config();
  std::vector<float> values;
  values.reserve(static_cast<size_t>(data.n_train * data.x(0).row_size()));
  over_train_rows(data, 0, [&](const float* rows, int n) {
    values.insert(values.end(), rows, rows + static_cast<size_t>(n * data.x(0).row_size()));
  });
  std::optional<ModelSpec> out = spec;
  out->layers[0].config["bin_boundaries"] = discretization_boundaries(
      values, cfg["num_bins"].get<int64_t>(), cfg["epsilon"].get<double>());
  return out;
}

bool needs_adapt(const Model& m) {
  for (size_t i = 0; i < m.num_layers(); ++i)
    if (normalization_adapts(m.layer(i))) return true;
  return false;
}

std::vector<std::string> adapt_problems(const Model& m, const FleetData& data) {
  std::vector<std::string> out;
  for (size_t i = 0; i < m.num_layers(); ++i) {
    if (!normalization_adapts(m.layer(i))) continue;
    const std::string who = "layer " + std::to_string(i) + " '" + m.layer(i).name() +
                            "' (Normalization) has no mean and variance, so it adapts them from "
                            "the training data of its input";
    const auto& ins = m.layer_inputs(i);
    if (ins.size() != 1 || !m.is_input(ins[0])) {
      out.push_back(who + "; expected it to take a model input directly, got '" +
                    m.node_name(ins[0]) +
                    "'\nhint: move it first, or give it mean and variance in its config");
      continue;
    }
    if (data.n_train <= 0)
      out.push_back(who + "; expected training rows, got none (data " + data.train_name + ")");
  }
  return out;
}

void adapt_weights(const FleetData& data, Network& net) {
  const Model& m = net.model();
  // The plan's validation reports these; a caller that skipped it gets the first as an error.
  if (const auto problems = adapt_problems(m, data); !problems.empty())
    throw ModelError("failed to adapt model '" + m.name() + "': " + problems[0]);
  for (size_t i = 0; i < m.num_layers(); ++i) {
    const Layer& l = m.layer(i);
    if (!normalization_adapts(l)) continue;
    const int in = m.layer_inputs(i)[0];
    const auto k = static_cast<size_t>(in);
    NormalizationStats stats(l, m.input(k).shape);
    over_train_rows(data, k, [&](const float* rows, int n) { stats.add_for_mean(rows, n); });
    over_train_rows(data, k, [&](const float* rows, int n) { stats.add_for_variance(rows, n); });
    stats.finish(net.param(i, 0), net.param(i, 1), net.param(i, 2));
  }
}

}  // namespace nnfleet
