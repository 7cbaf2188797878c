// apply_fine_tuning: the plan's freeze and unfreeze_from over a model's layers.
#include "fleet/fit/fine_tune.h"

#include <string>

namespace nnfleet {
namespace {

// A layer's top-level entry: its outermost nested model, or the layer itself.
std::string top_name(const Model& m, size_t i) {
  const auto& scopes = m.training(i).scopes;
  return scopes.empty() ? m.layer(i).name() : scopes.front();
}

bool matches(const Model& m, size_t i, const std::string& name) {
  if (m.layer(i).name() == name) return true;
  for (const auto& s : m.training(i).scopes)
    if (s == name) return true;
  return false;
}

std::string listing(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 20; ++i)
    s += (s.empty() ? "" : ", ") + std::to_string(i) + ": " + names[i];
  return s + (names.size() > 20 ? ", ..." : "");
}

}  // namespace

std::shared_ptr<const Model> apply_fine_tuning(const ModelSpec& spec,
                                               std::shared_ptr<const Model> model,
                                               std::vector<float>& params) {
  if (spec.freeze.empty() && spec.unfreeze_from.empty()) return model;
  const Model& m = *model;
  const size_t L = m.num_layers();
  std::vector<std::string> tops;  // Keras's model.layers, without the input
  std::vector<size_t> top_of(L);
  for (size_t i = 0; i < L; ++i) {
    // A shared layer's further call is its layer's entry (Keras lists a shared layer once).
    if (const int o = m.shares(i); o >= 0) {
      top_of[i] = top_of[static_cast<size_t>(o)];
      continue;
    }
    const std::string t = top_name(m, i);
    if (tops.empty() || tops.back() != t) tops.push_back(t);
    top_of[i] = tops.size() - 1;
  }
  std::vector<bool> frozen(L);
  for (size_t i = 0; i < L; ++i) frozen[i] = m.training(i).frozen;
  std::string problems;
  auto problem = [&](const std::string& where, const std::string& what) {
    problems += (problems.empty() ? "" : "\n") + where + ": " + what;
  };
  const std::string in = "in '" + spec.keras + "'";
  if (!spec.unfreeze_from.empty()) {
    size_t first = L;
    for (size_t i = 0; i < L && first == L; ++i)
      if (matches(m, i, spec.unfreeze_from)) first = i;
    if (first == L)
      problem(spec.unfreeze_from_where, "no layer or nested model '" + spec.unfreeze_from + "' " +
                                            in + "; expected one of " + listing(tops));
    for (size_t i = 0; i < L && first < L; ++i) frozen[i] = i < first;
  }
  for (size_t k = 0; k < spec.freeze.size(); ++k) {
    const Json& f = spec.freeze[k];
    bool found = false;
    for (size_t i = 0; i < L; ++i) {
      const bool hit = f.is_string() ? matches(m, i, f.get<std::string>())
                                     : top_of[i] == static_cast<size_t>(f.get<int64_t>());
      if (hit) frozen[i] = found = true;
    }
    if (!found)
      problem(spec.freeze_where[k], f.is_string()
                                        ? "no layer or nested model '" + f.get<std::string>() +
                                              "' " + in + "; expected one of " + listing(tops)
                                        : "layer index " + f.dump() + " is out of range " + in +
                                              "; expected 0 to " + std::to_string(tops.size() - 1) +
                                              " (" + listing(tops) + ")");
  }
  if (!problems.empty()) throw ModelError(problems);
  bool same = true;
  for (size_t i = 0; i < L; ++i) same = same && frozen[i] == m.training(i).frozen;
  if (same) return model;
  std::shared_ptr<const Model> out = m.with_frozen(frozen);
  if (!params.empty()) {
    std::vector<float> moved(params.size());
    remap_params(m, params.data(), *out, moved.data());
    params = std::move(moved);
  }
  return out;
}

}  // namespace nnfleet
