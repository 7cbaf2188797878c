// `nnfleet export MODEL --to OUT.onnx`: any model nnfleet loads (a Keras .keras/.h5 file, a
// to_json() .json with --weights, or a trained model of a run, RUN/models/NAME.keras) as an ONNX
// file (io/onnx/onnx_writer.h). A dimension the file leaves free (a sequence length) is fixed by
// --input-shape, as the data fixes it in predict.
#include <algorithm>
#include <cstdio>

#include "commands.h"
#include "model_run.h"
#include "nnfleet/model.h"

namespace nnfleet::cli {
namespace {

struct ExportArgs {
  std::string model, weights, to;
  std::vector<std::string> input_shapes;  // "12" or "28,28,1", one per model input
};

std::vector<int64_t> parse_shape(const std::string& s) {
  std::vector<int64_t> out;
  size_t p = 0;
  while (p <= s.size()) {
    const size_t q = std::min(s.find(',', p), s.size());
    const std::string part = s.substr(p, q - p);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != part.size() || part.empty() || v < 1 ||
        out.size() == static_cast<size_t>(api::kMaxRank))
      throw UsageError("failed to parse --input-shape '" + s +
                       "': expected positive sizes separated by commas (a sample's shape, e.g. "
                       "300 or 28,28,1), got '" +
                       part + "'");
    out.push_back(v);
    p = q + 1;
  }
  return out;
}

// The loader sizes only the dimensions a file leaves free from --input-shape: a size that
// contradicts one the file fixes would be ignored, and the export not be what was asked for.
void check_input_shapes(const ExportArgs& a, const std::vector<std::vector<int64_t>>& shapes,
                        const api::Model& m) {
  const auto& inputs = m.inputs();
  if (shapes.size() > inputs.size())
    throw UsageError("failed to export '" + a.model + "': it has " + std::to_string(inputs.size()) +
                     " input(s); expected at most that many --input-shape, got " +
                     std::to_string(shapes.size()));
  for (size_t k = 0; k < shapes.size(); ++k) {
    const std::vector<int64_t>& given = shapes[k];
    const std::vector<int64_t>& model = inputs[k].shape;
    if (!api::sample_shape_fits(given, model))
      throw UsageError("failed to export '" + a.model + "': --input-shape " + a.input_shapes[k] +
                       " contradicts the file's input '" + inputs[k].name + "'; expected " +
                       "a sample shape of " + api::shape_text(model) +
                       " (its free dimensions sized from --input-shape), got " +
                       api::shape_text(given));
  }
}

int run_export(const ExportArgs& a) {
  if (!ends_with(a.to, ".onnx"))
    throw UsageError("failed to parse --to '" + a.to + "': expected a file name ending in .onnx");
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& s : a.input_shapes) shapes.push_back(parse_shape(s));
  const api::Model m = api::Model::load(a.model, a.weights, shapes);
  check_input_shapes(a, shapes, m);
  if (!m.has_weights())
    throw UsageError("failed to export '" + a.model +
                     "': it holds no weights; expected --weights WEIGHTS.h5 "
                     "(model.save_weights) with an architecture file");
  m.save(a.to);
  auto list = [](const std::vector<api::TensorInfo>& ts) {
    std::string s;
    for (const api::TensorInfo& t : ts) {
      std::vector<int64_t> shape{-1};
      shape.insert(shape.end(), t.shape.begin(), t.shape.end());
      s += (s.empty() ? "" : ", ") + terminal_safe(t.name) + " " + api::shape_text(shape);
    }
    return s;
  };
  std::fprintf(stderr, "nnfleet export: wrote %s (%zu layers; inputs %s; outputs %s)\n",
               a.to.c_str(), m.count_layers(), list(m.inputs()).c_str(), list(m.outputs()).c_str());
  return 0;
}

}  // namespace

void add_export_command(CLI::App& app, Run& run) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* c = app.add_subcommand(
      "export",
      "Write a model (.keras, .h5, to_json() .json with --weights, or a run's models/NAME.keras) "
      "as ONNX (opset 13, dynamic batch axis)");
  c->add_option("model", args->model, "The model file")->required();
  c->add_option("--to", args->to, "The ONNX file to write (OUT.onnx)")->required();
  c->add_option("--weights", args->weights, "Weights file (model.save_weights .h5) for MODEL");
  c->add_option("--input-shape", args->input_shapes,
                "A sample's shape for each model input whose file leaves a dimension free "
                "(e.g. 300 for a sequence of 300 word ids); one per input, in input order")
      ->allow_extra_args(false);
  c->callback([&run, args] { run = [args] { return run_export(*args); }; });
}

}  // namespace nnfleet::cli
