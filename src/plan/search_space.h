// A search's space (README "Search"): its parameters as written (one distribution each, with an
// optional `when` and `per`), the draw u in [0, 1) of each parameter of each trial (random: a
// stream of nnfleet's Rng per trial and name; sobol: GSL's Sobol sequence, digitally shifted by
// the seed), and the mapping of u to a value. Api's sample_parameter takes the same path, so a
// Python build(trial) draws what a plan's space would. Internal to src/plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "plan/plan_problems.h"

namespace nnfleet::plan_detail {

// The values of one trial, in the space's order (NAME_0, NAME_1, ... for a `per` parameter).
using Parameters = std::vector<std::pair<std::string, Json>>;

// A condition on earlier parameters: parameter -> the values for which it holds.
using When = std::vector<std::pair<std::string, std::vector<Json>>>;

struct SpaceParameter {
  enum class Kind { kFloat, kInt, kChoice, kFixed };
  std::string name;
  std::string path;  // "search.space.lr", for messages
  Kind kind = Kind::kFixed;
  double lo = 0, hi = 0;  // float and int: the range, both ends included
  double step = 0;        // 0: none
  bool log = false;
  Json values;         // choice: the list; fixed: the value
  std::string per;     // an int parameter: one value per index 0..value-1, named NAME_i; "" none
  size_t per_max = 0;  // the largest value `per` can take: the dimensions this parameter holds
  When when;
  size_t dimension = 0;  // its first dimension in the flattened space (sobol)
  bool checked = true;   // false: its distribution had a problem (reported); takes any value

  // Whether `v` is a value this parameter can take (for `when` conditions).
  bool can_take(const Json& v) const;
  // "float", "int", "choice" or "fixed" (SearchParameter::kind).
  const char* kind_name() const;
};

// The distribution keys and the modifiers a space parameter may add.
extern const std::vector<std::string> kDistributionKeys;

// The distribution mapping `v` of parameter `name` at field path `path` (`when` and `per` are
// left to the space, which knows the other parameters); nullopt after reporting into `pr`.
std::optional<SpaceParameter> read_distribution(Problems& pr, const std::string& path,
                                                const std::string& name, const Json& v);

// The value `p` takes at u in [0, 1) (design "Mapping u -> value"): a float for float kinds, an
// integer for int, a choice's value as written, a fixed value itself.
Json value_at(const SpaceParameter& p, double u);

// u of parameter `name` (NAME_i for one of a per) of trial `trial` under `seed`: the 53 high bits
// of the first draw of Rng(seed, "trial/<trial>", "param/<name>").
double random_u(uint64_t seed, size_t trial, const std::string& name);

// The Sobol sequence (GSL's gsl_qrng_sobol: Bratley and Fox's direction numbers, at most
// kSobolMaxDimensions), from point 1 on (the origin skipped), each dimension digitally shifted
// by 30 bits drawn from the seed: a point's u has 30 bits, like GSL's.
class SobolSequence {
 public:
  static constexpr size_t kMaxDimensions = 40;  // GSL's SOBOL_MAX_DIMENSION
  SobolSequence(uint64_t seed, size_t dimensions);
  ~SobolSequence();
  SobolSequence(const SobolSequence&) = delete;
  SobolSequence& operator=(const SobolSequence&) = delete;
  // The next point (trial 0 first), `dimensions` values in [0, 1).
  const std::vector<double>& next();

 private:
  void* q_;  // gsl_qrng*
  std::vector<uint32_t> shift_;
  std::vector<double> point_;
};

bool same_value(const Json& a, const Json& b);  // numbers by value (2 == 2.0)

// One trial's values, compactly: (dimension of the flattened space, value) in the space's order;
// SearchSpace::names says each dimension's name (a plan of 100,000 trials holds them all).
using Trial = std::vector<std::pair<uint32_t, Json>>;

struct SearchSpace {
  std::vector<SpaceParameter> params;  // written order
  std::vector<std::string> names;      // the flattened space: a name per dimension (NAME_i)

  // Appends `p` (its `per` and `when` read), giving it its dimensions.
  void add(SpaceParameter p);
  // The trials 0..n-1 under `seed`, drawn by `sampler` ("random" or "sobol"; sobol needs at
  // most SobolSequence::kMaxDimensions dimensions).
  std::vector<Trial> draw(uint64_t seed, size_t n, const std::string& sampler) const;
  const SpaceParameter* find(const std::string& name) const;
  // The value of parameter `name` in `t`, or nullptr when the trial did not draw it.
  const Json* value(const Trial& t, const std::string& name) const;
  // Whether `when` holds for `t` (a parameter not drawn holds no value).
  bool holds(const When& when, const Trial& t) const;
  Parameters named(const Trial& t) const;
};

// The value parameter `name` with distribution `d` (a space's form, without `when` and `per`)
// takes in trial `trial` under `seed`: drawn by `sampler` ("random", or "sobol" at dimension
// `dimension` of the flattened space), as a plan's space draws it. Throws UsageError naming the
// parameter and the rule.
Json sample_one(uint64_t seed, size_t trial, const std::string& name, const Json& d,
                const std::string& sampler, size_t dimension);

}  // namespace nnfleet::plan_detail
