// A search's part of a fleet run (internal to src/fleet): its scheduler made from the prepared
// jobs, what a resumed folder tells it, and what the run writes of it (results.json's `search`
// and `parameters`, trials.csv). fleet.cpp calls these; a plain run calls only the parameters'.
#pragma once

#include <string>
#include <vector>

#include "fleet/fleet_data.h"
#include "fleet/run_state.h"

namespace nnfleet::fleet_detail {

// st.search from the plan's search and the prepared jobs (their data's training rows and cost).
void make_search(const Plan& plan, const std::vector<FleetData>& data, RunState& st);
// On a resume: trial `j` (not finished) from its checkpoint, when it has one: its epochs and
// metric go to the scheduler and its result is a paused one, so that the scheduler can prune it.
void resume_trial(RunState& st, const PreparedJob& j);
// In a search, every result's rungs; the trials a stop or time limit left paused say so.
void fill_rungs(RunState& st);
// results.json's extra top level: `parameters` (and `search`).
Json results_head(const Plan& plan, const RunState& st);
// Model k's `parameters` for results.json (none: an empty object).
Json parameters_json(const Plan& plan, size_t k);
// trials.csv of a search; throws FileError.
void write_trials_csv(const Plan& plan, const RunState& st);

}  // namespace nnfleet::fleet_detail
