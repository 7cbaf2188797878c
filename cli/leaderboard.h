// What `nnfleet train` prints of a run: the leaderboard and the exit code.
#pragma once

#include <string>

#include "nnfleet/results.h"

namespace nnfleet::cli {

// The `top` best models by the run's ranking metric (RunResult::ranking) as a table: rank,
// model, status, epochs, the metric, seconds, samples/s.
std::string leaderboard_text(const api::RunResult& r, int top);

// No model trained to the end (every one diverged), and the run was not interrupted.
bool none_done(const api::RunResult& r);

// What `nnfleet train` exits with: 1 when the output folder or the report could not be written,
// 130 when interrupted, 3 when a model failed or none trained to the end, else 0.
int exit_code(const api::RunResult& r);

}  // namespace nnfleet::cli
