// Loading the datasets of a plan (FleetData, fit/data_view.h): one FleetData per distinct source
// (Plan::sources), the plan's `data:` and the models' own, loaded once and shared read-only by
// every worker.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "fleet/fit/data_view.h"
#include "plan/plan.h"

namespace nnfleet {

// The arrays a program gives, by key (FleetOptions::arrays); null: none.
using GivenArrays = std::map<std::string, Array>;

// The files of a source as messages name them: "'data.npz'", "'x.npy' and 'y.npy'",
// "{array: x} and {array: y}".
std::string describe_source(const DataSource& s);

// The array given as `key` ({array: KEY}). Throws DataError naming the key and the keys given.
const Array& given_array(const GivenArrays* arrays, const std::string& key);

// Loads one source (its arrays from `arrays`); throws DataError naming the file and the problem.
XY load_source(const DataSource& s, const GivenArrays* arrays = nullptr);
// Loads train (and test) of a plan and checks they agree (same sample shape, x and y rows) and
// hold only finite values; throws DataError naming the file, the row and the column.
// A model's own source (spec.where set) names the model and the plan line in its errors.
FleetData load_fleet_data(const DataSpec& spec, const GivenArrays* arrays = nullptr);

// Every source of a plan, in Plan::sources order, each loaded once. Throws DataError listing
// every source that failed (all of them, not only the first).
std::vector<FleetData> load_plan_data(const std::vector<DataSpec>& sources,
                                      const GivenArrays* arrays = nullptr);

// The bytes held by every source together (memory estimates).
size_t data_bytes(const std::vector<FleetData>& data);

}  // namespace nnfleet
