// The subcommands of the nnfleet tool. Each lives in its own file and registers itself on the
// CLI11 app; `run` is set to the function main() calls when that subcommand was chosen. The
// function returns the exit code; errors are thrown as nnfleet::Error and turned into exit codes
// by main() alone.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace nnfleet::cli {

using Run = std::function<int()>;

void add_train_command(CLI::App& app, Run& run);
void add_predict_command(CLI::App& app, Run& run);
void add_inspect_command(CLI::App& app, Run& run);
void add_report_command(CLI::App& app, Run& run);
void add_evaluate_command(CLI::App& app, Run& run);
void add_export_command(CLI::App& app, Run& run);

// The hint `nnfleet train` prints after a write to the output folder `out_dir` failed with
// `write_error` (a FileError's message, which ends with the system's reason): free space for a
// full disk or a file-size limit, permissions for a refused write, and a fresh start when the
// folder is gone (--resume cannot continue it). `plan` is the plan file as given.
std::string write_failure_hint(const std::string& plan, const std::string& out_dir,
                               const std::string& write_error);

}  // namespace nnfleet::cli
