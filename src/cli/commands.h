// The subcommands of the nnfleet tool. Each lives in its own file and registers itself on the
// CLI11 app; `run` is set to the function main() calls when that subcommand was chosen. The
// function returns the exit code; errors are thrown as nnfleet::Error and turned into exit codes
// by main() alone.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace nnfleet::cli {

using Run = std::function<int()>;

void add_train_command(CLI::App& app, Run& run);
void add_predict_command(CLI::App& app, Run& run);
void add_inspect_command(CLI::App& app, Run& run);
void add_report_command(CLI::App& app, Run& run);
void add_evaluate_command(CLI::App& app, Run& run);
void add_export_command(CLI::App& app, Run& run);

}  // namespace nnfleet::cli
