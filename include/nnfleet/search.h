// nnfleet's public API: the draws of a search (README "Search"), for a program that builds each
// trial's model itself (Python's nnfleet.search(build, ...), whose trial.uniform(...) and friends
// call this): the same value a plan's search.space gives the same parameter of the same trial.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "nnfleet/error.h"

namespace nnfleet::api {

// The value parameter `name` takes in trial `trial` (0-based) of a search under `seed`, as JSON
// text ("0.0031", "64", "\"relu\""): `distribution_json` is a distribution of a plan's
// search.space as JSON ({"loguniform": [1e-4, 1e-2]}, {"int": [32, 512], "log": true},
// {"choice": ["relu", "tanh"]}, {"fixed": 0.9}; no "when" or "per"). sampler "random": a draw
// that depends only on the seed, the trial and the name; "sobol": point trial + 1 of the Sobol
// sequence at `dimension` (< 40; the parameter's position in the flattened space), shifted by
// the seed. Throws UsageError naming the parameter and the rule on a bad distribution, sampler or
// dimension. Thread-safe; a sobol draw costs O(trial) (the sequence is walked from its start).
std::string sample_parameter(uint64_t seed, size_t trial, const std::string& name,
                             const std::string& distribution_json,
                             const std::string& sampler = "random", size_t dimension = 0);

}  // namespace nnfleet::api
