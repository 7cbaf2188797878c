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
// Every result's parameters (a grid's vars, a trial's values) and, in a search, its rungs; the
// trials a time limit left paused said so.
void fill_parameters_and_rungs(const Plan& plan, RunState& st);
// results.json's extra top level: `parameters` (and `search`).
Json results_head(const Plan& plan, const RunState& st);
// trials.csv of a search; throws FileError.
void write_trials_csv(const Plan& plan, const RunState& st);

}  // namespace nnfleet::fleet_detail
