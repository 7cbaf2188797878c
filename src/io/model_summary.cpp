// Text summary of a loaded model, laid out like Keras 2's model.summary().
#include "io/model_summary.h"

#include <cstdio>
#include <optional>

#include "io/keras/keras_graph.h"
#include "loss/loss.h"

namespace nnfleet {
namespace {

// With `other` (the same tensor at another free input length), a dimension the two disagree on
// prints as None.
std::string keras_shape_str(const Shape& s, const Shape* other = nullptr) {
  std::string out = "(None";
  for (int i = 0; i < s.rank(); ++i)
    out +=
        ", " + (other && (other->rank() != s.rank() || (*other)[i] != s[i]) ? std::string("None")
                                                                            : std::to_string(s[i]));
  return out + ")";
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

// A value of the file's configs, cut to about 120 characters, as a terminal may be shown it.
std::string compact(const Json& j) {
  std::string s =
      j.is_string() ? j.get<std::string>() : j.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 120) {
    s.resize(117);
    s += "...";
  }
  return terminal_safe(s);
}

std::string describe_loss(const Json& l) {
  try {
    return loss_name(parse_loss(l)) + (parse_loss(l).from_logits ? " (from logits)" : "");
  } catch (const Error&) {
    return compact(l);
  }
}

std::string describe_optimizer(const Json& o) {
  if (o.is_string()) return terminal_safe(o.get<std::string>());
  if (!o.is_object() || !o.contains("class_name")) return compact(o);
  std::string s = compact(o["class_name"]);
  const Json c = o.value("config", Json());
  if (c.is_object()) {
    for (const char* key : {"learning_rate", "lr"})
      if (c.contains(key) && c[key].is_number()) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " (learning_rate %.6g)", c[key].get<double>());
        s += buf;
        break;
      }
  }
  return s;
}

}  // namespace

std::string thousands(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[u]);
  return buf;
}

namespace {

struct TableLayout {
  bool functional = false;
  size_t w1 = 34, w2 = 26, w3 = 12;
};

// The table's rows: the inputs, then every layer with its output shape, parameters and (in a
// functional model) what it is connected to.
void layer_rows(std::string& s, const Model& m, const Model* o, const TableLayout& t) {
  const bool functional = t.functional;
  const size_t w1 = t.w1, w2 = t.w2, w3 = t.w3;
  auto row = [&](const std::string& name, const std::string& cls, const Shape& out,
                 const Shape* out_other, uint64_t params, bool params_vary,
                 const std::string& inputs) {
    // Names come from the file: escaped, so that none can drive the terminal.
    std::string line = pad(terminal_safe(name) + " (" + terminal_safe(cls) + ")", w1) +
                       pad(keras_shape_str(out, out_other), w2) +
                       pad(params_vary ? "per length" : thousands(params), w3) +
                       (functional ? terminal_safe(inputs) : "");
    while (!line.empty() && line.back() == ' ') line.pop_back();
    s += line + "\n";
  };
  auto count = [](const Model& model, size_t i) {
    uint64_t params = 0;
    if (model.shares(i) >= 0) return params;  // counted at the shared layer's first call
    for (const auto& p : model.planned(i).params) params += static_cast<uint64_t>(p.shape.size());
    return params;
  };
  for (size_t k = 0; k < m.num_inputs(); ++k) {
    const ModelInput& in = m.input(k);
    if (in.is_string) {  // its strings' shape; the string layer after it shows what it makes
      row(in.name, "InputLayer, dtype string", in.string_shape, nullptr, 0, false, "");
      continue;
    }
    row(in.name, "InputLayer", in.shape,
        o && o->num_inputs() == m.num_inputs() ? &o->input(k).shape : nullptr, 0, false, "");
  }
  for (size_t i = 0; i < m.num_layers(); ++i) {
    const uint64_t params = count(m, i);
    std::string inputs;
    for (size_t j = 0; j < m.layer_inputs(i).size(); ++j) {
      // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "[" + to_string(k).
      if (!inputs.empty()) inputs += ", ";
      inputs += m.node_name(m.layer_inputs(i)[j]);
      if (const int k = m.input_tensor(i, j); k > 0) {
        inputs += '[';
        inputs += std::to_string(k);
        inputs += ']';
      }
    }
    row(m.layer(i).name(), m.layer(i).class_name(), m.planned(i).out_shape,
        o ? &o->planned(i).out_shape : nullptr, params, o && count(*o, i) != params, inputs);
  }
}

// The params and FLOPs lines (which may depend on the input's free dimensions).
void totals_lines(std::string& s, const Model& m, const Model* o) {
  const uint64_t t = m.trainable_params(), f = m.non_trainable_params();
  if (o && (o->trainable_params() != t || o->non_trainable_params() != f)) {
    s += "Total params: depend on the input's free (None) dimensions\n";
  } else {
    s += "Total params: " + thousands(t + f) + " (" +
         human_bytes(4.0 * static_cast<double>(t + f)) + ")\n";
    s += "Trainable params: " + thousands(t) + " (" + human_bytes(4.0 * static_cast<double>(t)) +
         ")\n";
    s += "Non-trainable params: " + thousands(f) + " (" +
         human_bytes(4.0 * static_cast<double>(f)) + ")\n";
  }
  if (o && o->forward_flops() != m.forward_flops()) {
    // Every input's probe shape: a model may have several (issue 35).
    std::string at = m.num_inputs() > 1 ? "inputs " : "input ";
    for (size_t k = 0; k < m.num_inputs(); ++k) at += (k ? ", " : "") + m.input(k).shape.str();
    s += "Forward FLOPs per sample: depend on the free (None) dimensions (" +
         thousands(static_cast<uint64_t>(m.forward_flops())) + " at " + at + ")\n";
  } else {
    s += "Forward FLOPs per sample: " + thousands(static_cast<uint64_t>(m.forward_flops())) + "\n";
  }
  if (o)
    s += "Free (None) input dimensions take their size from the data given to predict or train\n";
}

// What the file says of Keras and of training: version, training config, optimizer state.
void training_lines(std::string& s, const LoadedModel& lm) {
  s += "Keras version: " +
       (lm.keras_version.empty() ? std::string("(not recorded)") : terminal_safe(lm.keras_version));
  if (!lm.backend.empty()) s += " (backend " + terminal_safe(lm.backend) + ")";
  s += "\n";
  const Json& tc = lm.training_config;
  if (tc.is_object()) {
    s += "Training config:";
    if (tc.contains("loss") && !tc["loss"].is_null())
      s += " loss " + describe_loss(tc["loss"]) + ";";
    const Json opt =
        tc.contains("optimizer_config") ? tc["optimizer_config"] : tc.value("optimizer", Json());
    if (!opt.is_null()) s += " optimizer " + describe_optimizer(opt) + ";";
    const Json metrics = tc.value("metrics", Json());
    if (!metrics.is_null() && !metrics.empty()) s += " metrics " + compact(metrics) + ";";
    if (s.back() == ';') s.pop_back();
    s += "\n";
  } else if (!tc.is_null()) {
    s += "Training config: " + compact(tc) + "\n";
  } else {
    s += "Training config: none (the model was not compiled)\n";
  }
  const Json& oi = lm.optimizer_state_info;
  if (oi.is_object()) {
    s += "Optimizer state: " + std::to_string(oi.value("variables", 0)) + " variables";
    if (oi.contains("name")) s += " of '" + compact(oi["name"]) + "'";
    if (oi.contains("iterations")) s += ", " + compact(oi["iterations"]) + " iterations";
    s += lm.optimizer_state.empty() ? " (not restored)\n" : " (restorable)\n";
  }
}

}  // namespace

std::string model_summary(const LoadedModel& lm, const std::string& path,
                          const LoadedModel* other_length) {
  const Model& m = *lm.model;
  const Model* o = other_length ? other_length->model.get() : nullptr;
  if (o && o->num_layers() != m.num_layers()) o = nullptr;
  const bool functional = lm.class_name == "Functional" || !m.is_sequential();
  TableLayout t;
  t.functional = functional;
  const size_t w1 = t.w1, w2 = t.w2, w3 = t.w3;
  const size_t width = w1 + w2 + w3 + (functional ? 24 : 0);
  const std::string rule(width, '_'), double_rule(width, '=');
  std::string s;
  s += "Model: \"" + terminal_safe(m.name()) + "\" (" + terminal_safe(lm.class_name) + ")\n";
  s += "File: " + terminal_safe(path) + " (" +
       (lm.format == "keras" ? std::string(".keras archive")
        : lm.format == "h5"  ? std::string("HDF5")
                             : std::string("architecture JSON")) +
       (lm.has_weights ? ", with weights" : ", no weights") + ")\n";
  s += rule + "\n";
  std::string head = pad("Layer (type)", w1) + pad("Output Shape", w2) + pad("Param #", w3) +
                     (functional ? "Connected to" : "");
  while (!head.empty() && head.back() == ' ') head.pop_back();
  s += head + "\n";
  s += double_rule + "\n";
  layer_rows(s, m, o, t);
  s += double_rule + "\n";
  if (m.num_inputs() > 1 || m.num_outputs() > 1) {
    // The order predict takes its --x files and writes its outputs in.
    s += "Inputs:";
    for (size_t k = 0; k < m.num_inputs(); ++k)
      s += std::string(k ? "," : "") + " " + terminal_safe(m.input(k).name) + " " +
           keras_shape_str(m.input(k).shape, o ? &o->input(k).shape : nullptr);
    s += "\nOutputs:";
    for (size_t j = 0; j < m.num_outputs(); ++j)
      s += std::string(j ? "," : "") + " " + terminal_safe(m.output_name(j)) + " " +
           keras_shape_str(m.output_shape(j), o ? &o->output_shape(j) : nullptr);
    s += "\n";
  }
  totals_lines(s, m, o);
  s += rule + "\n";
  training_lines(s, lm);
  return s;
}

namespace {

// Two sizes for the free (None) input dimensions of a file, to tell which shapes, parameters and
// FLOPs depend on them: multiples of 32 so that strided and pooled lengths stay whole.
constexpr int64_t kProbeLengths[2] = {64, 96};

// The file loaded with every free dimension of every input at `length` (any number of inputs,
// of any ranks); nullopt when it does not load so.
std::optional<LoadedModel> load_with_free_length(const std::string& path,
                                                 const std::string& weights, int64_t length) {
  try {
    return load_keras_model(path, weights, {ModelInput{kEveryFreeDimension, Shape{length}}});
  } catch (const Error&) {
  }
  return std::nullopt;
}

}  // namespace

std::string describe_model_file(const std::string& path, const std::string& weights) {
  try {
    return model_summary(load_keras_model(path, weights), path);
  } catch (const Error&) {
    // A free (None) dimension has no size without data: describe the model at two sizes.
    std::optional<LoadedModel> lm = load_with_free_length(path, weights, kProbeLengths[0]);
    std::optional<LoadedModel> other = load_with_free_length(path, weights, kProbeLengths[1]);
    if (!lm || !other) throw;
    return model_summary(*lm, path, &*other);
  }
}

}  // namespace nnfleet
