// The fleet: validates every model of a plan against its data, then trains them all with one
// pinned worker thread per core, longest job first, writing the output folder described in
// README.md. Results are bit-identical for any number of workers: each model's random streams
// derive from the plan seed and its name only, and kernels are single-threaded.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "fleet/display.h"
#include "fleet/job.h"
#include "fleet/plan.h"

namespace nnfleet {

struct FleetOptions {
  std::string out_dir;  // empty: runs/<plan>-<timestamp>
  int workers = 0;      // 0: one per core this process may run on
  bool resume = false;
  Display::Mode mode = Display::Mode::kLines;
  const std::atomic<bool>* stop = nullptr;  // set by a signal handler: finish batch, checkpoint
};

struct FleetSummary {
  std::string out_dir;
  std::vector<JobResult> results;  // plan order
  double makespan = 0.0;           // seconds, launch of the first job to the end of the last
  double busy_fraction = 0.0;      // job time / (workers x makespan)
  size_t peak_rss = 0;
  int workers = 0;
  bool interrupted = false;
  std::string rank_by;  // the leaderboard's metric
  bool rank_higher_is_better = true;
};

// Hooks the Keras I/O layer provides (kept here as functions so fleet does not depend on io).
struct ModelIo {
  // Builds the model of a `keras:` spec and fills its initial weights (empty when the file has
  // none). Throws Error.
  std::function<std::shared_ptr<const Model>(const ModelSpec&, const Shape&, std::vector<float>&)> load;
  // Saves a trained network to `path_without_extension` + its extension; returns the path.
  std::function<std::string(const Network&, const ModelSpec&, const std::string&)> save;
};

// Throws PlanError (every validation problem, listed), DataError, FileError before anything is
// written; after that, failures of single models are results, not exceptions.
FleetSummary run_fleet(const Plan& plan, const FleetOptions& opts, const ModelIo& io);

}  // namespace nnfleet
