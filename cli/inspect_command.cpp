// `nnfleet inspect MODEL`: a model.summary()-like table of a Keras file, its parameter totals,
// Keras version and training config.
#include <cstdio>

#include "commands.h"
#include "nnfleet/model.h"

namespace nnfleet::cli {
namespace {

struct InspectArgs {
  std::string model, weights;
};

int run_inspect(const InspectArgs& a) {
  // Names in the text are escaped (terminal_safe); written whole, never cut at a NUL.
  const std::string text = api::describe_model(a.model, a.weights);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, Run& run) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* c = app.add_subcommand("inspect", "Describe a Keras model file (.keras, .h5, .json)");
  c->add_option("model", args->model, "The model file")->required();
  c->add_option("--weights", args->weights, "Weights file (model.save_weights .h5) for MODEL");
  c->callback([&run, args] { run = [args] { return run_inspect(*args); }; });
}

}  // namespace nnfleet::cli
