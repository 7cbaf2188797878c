// SearchScheduler (search_scheduler.h): rungs, facts and decisions.
#include "fleet/search_scheduler.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace nnfleet::fleet_detail {

std::vector<int64_t> SearchScheduler::budgets(int bracket) const {
  const std::vector<int64_t> all = spec_.schedule.rungs();
  const size_t from = std::min(static_cast<size_t>(std::max(bracket, 0)), all.size() - 1);
  return {all.begin() + static_cast<std::ptrdiff_t>(from), all.end()};
}

SearchScheduler::SearchScheduler(const SearchSpec& spec, std::vector<Trial> trials)
    : spec_(spec), trials_(std::move(trials)), facts_(trials_.size()), work_(trials_.size()) {
  const int nb = spec_.schedule.kind == SearchSchedule::Kind::kHalving
                     ? std::max(1, spec_.schedule.brackets)
                     : 1;
  brackets_.resize(static_cast<size_t>(nb));
  rungs_.resize(trials_.size());
  for (size_t k = 0; k < trials_.size(); ++k) {
    const int b = static_cast<int>(k % static_cast<size_t>(nb));
    brackets_[static_cast<size_t>(b)].members.push_back(k);
    std::vector<int>& r = rungs_[k];
    for (int64_t budget : budgets(b)) {
      const int64_t rows = std::max<int64_t>(1, trials_[k].n_train);
      const int64_t e = spec_.schedule.samples ? (budget + rows - 1) / rows : budget;
      const int epochs = static_cast<int>(std::clamp<int64_t>(e, 1, 1 << 30));
      if (r.empty() || epochs > r.back()) r.push_back(epochs);
    }
  }
}

void SearchScheduler::reached(size_t k, const std::vector<EpochRecord>& history, JobStatus status,
                              bool paused) {
  Facts& f = facts_.at(k);
  f.running = false;
  if (status == JobStatus::kCancelled || status == JobStatus::kPending || paused) {
    if (history.size() < static_cast<size_t>(f.reached)) return;  // a stop: nothing new
  } else {
    f.ended = true;
    f.pruned = status == JobStatus::kPruned;
  }
  f.reached = std::max(f.reached, static_cast<int>(history.size()));
  f.value.resize(history.size(), NAN);
  for (size_t e = 0; e < history.size(); ++e) {
    const double* v = find_metric(history[e].values, spec_.metric);
    f.value[e] = v ? *v : NAN;
  }
}

double SearchScheduler::value_at(size_t k, int epoch) const {
  const Facts& f = facts_[k];
  return epoch >= 1 && static_cast<size_t>(epoch) <= f.value.size()
             ? f.value[static_cast<size_t>(epoch - 1)]
             : NAN;
}

bool SearchScheduler::known(size_t k, size_t rung) const {
  const Facts& f = facts_[k];
  const std::vector<int>& r = rungs_[k];
  return f.ended || f.reached >= r[std::min(rung, r.size() - 1)];
}

// Whether trial a (at epoch ea) is better than trial b (at eb): a finite value beats NaN, then
// the metric in the search's direction, then the lower trial index.
bool SearchScheduler::better(size_t a, size_t b, int ea, int eb) const {
  const double x = value_at(a, ea), y = value_at(b, eb);
  if (std::isfinite(x) != std::isfinite(y)) return std::isfinite(x);
  if (std::isfinite(x) && x != y) return spec_.higher_is_better ? x > y : x < y;
  return a < b;
}

// The trials of `compared` that go on from rung `rung`: halving keeps the best
// max(1, floor(n / reduction_factor)); median stopping keeps those not worse than the median.
std::vector<size_t> SearchScheduler::survivors(const std::vector<size_t>& compared,
                                               size_t rung) const {
  auto epochs = [&](size_t k) { return rungs_[k][rung]; };
  std::vector<size_t> order = compared;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return better(a, b, epochs(a), epochs(b)); });
  size_t keep = 0;
  if (spec_.schedule.kind == SearchSchedule::Kind::kHalving) {
    keep = std::max<size_t>(
        1, order.size() / static_cast<size_t>(std::max(2, spec_.schedule.reduction_factor)));
  } else {
    std::vector<double> v;
    for (size_t k : order)
      if (std::isfinite(value_at(k, epochs(k)))) v.push_back(value_at(k, epochs(k)));
    if (v.empty()) return {};
    const size_t m = v.size() / 2;  // v is sorted best first
    const double median = v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
    for (size_t k : order) {
      const double x = value_at(k, epochs(k));
      if (std::isfinite(x) && (spec_.higher_is_better ? x >= median : x <= median)) ++keep;
    }
    keep = std::max<size_t>(keep, 1);
  }
  order.resize(std::min(keep, order.size()));
  std::sort(order.begin(), order.end());
  return order;
}

bool SearchScheduler::decide(Bracket& b, std::vector<Pruned>& pruned) {
  const size_t j = b.rung;
  // The members that reached the rung's epochs are compared; those that ended before it are not.
  std::vector<size_t> compared;
  for (size_t k : b.members)
    if (facts_[k].reached >= rungs_[k][std::min(j, rungs_[k].size() - 1)]) compared.push_back(k);
  const bool last = std::all_of(b.members.begin(), b.members.end(),
                                [&](size_t k) { return j + 1 >= rungs_[k].size(); });
  if (last) {
    for (size_t k : compared)
      facts_[k].decided.push_back({rungs_[k].back(), value_at(k, rungs_[k].back()), "final"});
    b.complete = true;
    return false;
  }
  const std::vector<size_t> keep = survivors(compared, j);
  std::vector<size_t> next;
  for (size_t k : compared) {
    const int e = rungs_[k][j];
    const bool goes_on = std::binary_search(keep.begin(), keep.end(), k);
    Facts& f = facts_[k];
    if (f.ended) {
      f.decided.push_back({e, value_at(k, e),
                           f.reached > e ? "promoted"
                           : f.pruned    ? "pruned"
                                         : "final"});
      if (goes_on && f.reached > e) next.push_back(k);  // an earlier run trained it on
      continue;
    }
    f.decided.push_back({e, value_at(k, e), goes_on ? "promoted" : "pruned"});
    if (goes_on) {
      next.push_back(k);
    } else {
      f.ended = true;
      pruned.push_back({k, e,
                        "pruned after epoch " + std::to_string(e) + ": " + spec_.metric + " " +
                            api::figure_text(value_at(k, e)) + ", not among the best " +
                            std::to_string(keep.size()) + " of " + std::to_string(compared.size()) +
                            " at this rung"});
    }
  }
  b.members = std::move(next);
  b.rung = j + 1;
  if (b.members.empty()) b.complete = true;
  return !b.complete;
}

void SearchScheduler::queue_rung(Bracket& b) {
  for (size_t k : b.members) {
    Facts& f = facts_[k];
    if (f.ended || f.running) continue;
    const std::vector<int>& r = rungs_[k];
    const size_t j = std::min(b.rung, r.size() - 1);
    if (f.reached >= r[j]) continue;
    work_[k] = {k, r[j], j + 1 < r.size()};
    f.running = true;
    queue_.push({trials_[k].epoch_cost * (r[j] - f.reached), k});
  }
}

std::vector<SearchScheduler::Pruned> SearchScheduler::start() {
  for (Bracket& b : brackets_) queue_rung(b);
  return advance();
}

std::vector<SearchScheduler::Pruned> SearchScheduler::advance() {
  std::vector<Pruned> pruned;
  if (!deciding_) return pruned;
  for (Bracket& b : brackets_) {
    while (!b.complete && std::all_of(b.members.begin(), b.members.end(),
                                      [&](size_t k) { return known(k, b.rung); })) {
      if (!decide(b, pruned)) break;
      queue_rung(b);
    }
  }
  return pruned;
}

void SearchScheduler::stop_deciding() {
  deciding_ = false;
  for (; !queue_.empty(); queue_.pop()) facts_[queue_.top().trial].running = false;
}

std::optional<SearchScheduler::Work> SearchScheduler::next() {
  if (queue_.empty()) return std::nullopt;
  const size_t k = queue_.top().trial;
  queue_.pop();
  return work_[k];
}

bool SearchScheduler::finished() const {
  if (!queue_.empty()) return false;
  for (const Facts& f : facts_)
    if (f.running) return false;
  return true;
}

std::vector<api::Rung> SearchScheduler::rung_results(size_t k) const {
  std::vector<api::Rung> out = facts_.at(k).decided;
  // A trial whose rung was never decided (a time limit, a stop): where it stands.
  const Facts& f = facts_[k];
  if (!f.ended && f.reached > 0 && (out.empty() || out.back().epochs < f.reached))
    out.push_back({f.reached, value_at(k, f.reached), "stopped"});
  return out;
}

int64_t SearchScheduler::epochs_trained() const {
  int64_t n = 0;
  for (const Facts& f : facts_) n += f.reached;
  return n;
}

}  // namespace nnfleet::fleet_detail
