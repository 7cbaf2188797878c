// RunState: the queue, and the writes of finished jobs into the output folder (run_state.h).
#include "fleet/run_state.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "platform/files.h"

namespace nnfleet::fleet_detail {
namespace {

// Deletes a model's saved file (and an .onnx export beside it), and forgets its name.
void drop_model_file(ModelResult& r) {
  std::remove(r.model_file.c_str());
  std::filesystem::path onnx(r.model_file);
  if (onnx.extension() != ".onnx") {
    onnx.replace_extension(".onnx");
    std::remove(onnx.c_str());
  }
  r.model_file.clear();
}

}  // namespace

PreparedJob* RunState::take() {
  if (!search) {
    if (stopping()) return nullptr;
    const size_t qi = next.fetch_add(1);
    return qi < queue.size() ? queue[qi] : nullptr;
  }
  std::unique_lock<std::mutex> lock(search_mu);
  for (;;) {
    bool wait = false;
    if (PreparedJob* j = take_search(wait)) return j;
    if (!wait) return nullptr;
    // Woken by a decision; a stop or the time limit is seen within 50 ms.
    search_cv.wait_for(lock, std::chrono::milliseconds(50));
  }
}

PreparedJob* RunState::try_take(bool& wait) {
  wait = false;
  if (!search) return take();
  std::lock_guard<std::mutex> lock(search_mu);
  return take_search(wait);
}

PreparedJob* RunState::take_search(bool& wait) {
  wait = false;
  if (stopping()) return nullptr;
  if (deadline && std::chrono::steady_clock::now() >= *deadline && !deadline_noted) {
    deadline_noted = true;
    search->stop_deciding();
    const std::string n = "the search's time limit (" +
                          api::figure_text(plan.search->time_limit_seconds) +
                          " s) is reached: no trial starts another rung; resume with --resume";
    live->note(n, {{"event", "note"}, {"message", n}});
  }
  if (std::optional<SearchScheduler::Work> w = search->next()) {
    PreparedJob& j = jobs.at(w->trial);
    j.epoch_limit = w->limit;
    j.pause = w->pause;
    return &j;
  }
  wait = !search->finished();
  return nullptr;
}

bool RunState::search_ready() {
  if (stopping()) return true;
  std::lock_guard<std::mutex> lock(search_mu);
  return search->has_work() || search->finished() ||
         (deadline && !deadline_noted && std::chrono::steady_clock::now() >= *deadline);
}

void RunState::start_search() {
  std::vector<SearchScheduler::Pruned> pruned;
  {
    std::lock_guard<std::mutex> lock(search_mu);
    pruned = search->start();
  }
  prune(pruned);
}

void RunState::prune(const std::vector<SearchScheduler::Pruned>& pruned) {
  for (const SearchScheduler::Pruned& p : pruned) {
    const PreparedJob& job = jobs.at(p.trial);
    std::unique_lock<std::mutex> lock(out_mu);
    ModelResult& r = results.at(p.trial);
    r.status = JobStatus::kPruned;
    paused[p.trial] = false;
    r.message = p.message;
    r.epochs = p.epochs;
    if (static_cast<int>(r.history.size()) >= p.epochs && p.epochs > 0)
      r.metrics = r.history[static_cast<size_t>(p.epochs - 1)].values;
    try {
      folder->append(job.index, r, RunFolder::record(r, {}, "", 0));  // final: no flag
    } catch (const Error& e) {
      halt(e.what());
      return;
    }
    if (!opts.keep_history) {
      r.history.clear();
      r.history.shrink_to_fit();
    }
    if (live) live->job_pruned(r, job.cost);
    if (opts.observer) opts.observer->on_model_end(r);
    lock.unlock();
    std::remove((dir + "/checkpoints/" + job.name() + ".ckpt").c_str());
  }
}

// The order of the kept files: by the rank key, ties in plan order.
bool RunState::keeps_before(const ModelResult& a, size_t ia, size_t ib) const {
  const ModelResult& b = results[ib];
  if (ranks_before(a, b, keep_key)) return true;
  return !ranks_before(b, a, keep_key) && ia < ib;
}

void RunState::keep_file(size_t index) {
  if (keep_best == 0 || results.at(index).model_file.empty()) return;
  kept.erase(std::remove(kept.begin(), kept.end(), index), kept.end());  // a trial stored again
  kept.insert(std::upper_bound(kept.begin(), kept.end(), index,
                               [&](size_t a, size_t b) { return keeps_before(results[a], a, b); }),
              index);
  if (kept.size() <= keep_best) return;
  drop_model_file(results[kept.back()]);
  kept.pop_back();
}

bool RunState::outside_kept(size_t index, const ModelResult& r) const {
  if (keep_best == 0 || kept.size() < keep_best) return false;
  if (std::find(kept.begin(), kept.end(), index) != kept.end()) return false;  // a trial again
  return !keeps_before(r, index, kept.back());
}

bool RunState::wants_file(size_t index, const ModelResult& r) {
  std::lock_guard<std::mutex> lock(out_mu);
  return !outside_kept(index, r);
}

void RunState::keep_final(const RankKey& key) {
  if (keep_best == 0) return;
  size_t n = 0;
  for (const ModelResult* r : ranked(results, key))
    if (n++ >= keep_best && !r->model_file.empty())
      drop_model_file(results[static_cast<size_t>(r - results.data())]);
}

void RunState::halt(const std::string& why) {
  if (write_error.empty()) write_error = why;
  stop = true;
}

void RunState::store(const PreparedJob& job, JobResult r, const std::vector<ShippedFile>& files,
                     std::string model_file, uint64_t model_xxh3, int slot) {
  // Only this job writes these (outside the lock). Failing to write the model fails the job, as
  // failing to save it does on this rank; a lost checkpoint only means that a resumed job starts
  // from an earlier one.
  for (const auto& [path, bytes] : files) {
    const bool checkpoint = path.rfind("checkpoints/", 0) == 0;
    try {
      write_file_atomic(dir + "/" + path, bytes, Durability::kProcessCrash);
      if (!checkpoint) {
        model_file = path;
        model_xxh3 = hash_bytes(bytes);
      }
    } catch (const Error& e) {
      if (checkpoint) continue;
      r.status = JobStatus::kFailed;
      r.message = e.what();
      r.retry = r.write_failed = true;
    }
  }
  // A cancelled job, or one failed by the output folder, is not final: it keeps its checkpoint
  // and has no record, so --resume runs it again. A write that failed stops the run: every
  // later one would fail the same way. The record is made before the lock is taken.
  const bool final = r.status != JobStatus::kCancelled && !r.retry;
  // The figures its record keeps: a resumed run reports the same.
  r.seconds = timing_figure(r.seconds);
  r.samples_per_second = timing_figure(r.samples_per_second);
  for (EpochRecord& e : r.history) e.seconds = timing_figure(e.seconds);
  if (final && !model_file.empty()) r.model_file = dir + "/" + model_file;
  RunFolder::Record rec =
      final ? RunFolder::record(r, r.flags(), model_file, model_xxh3) : RunFolder::Record{};
  std::unique_lock<std::mutex> lock(out_mu);
  bool recorded = false;
  if (final && !r.model_file.empty() && outside_kept(job.index, r)) {
    // Its file would go at once (keep_file): its record names none (about 70 bytes each of the
    // 99,900 models a default run of 100,000 does not keep).
    drop_model_file(r);
    rec = RunFolder::record(r, r.flags(), "", 0);
  }
  if (final) {
    try {
      folder->append(job.index, r, rec);
      recorded = true;
    } catch (const Error& e) {
      r.status = JobStatus::kFailed;
      r.message = e.what();
      r.retry = r.write_failed = true;
    }
  }
  if (r.write_failed) halt(r.message);
  const bool checkpointed = r.checkpointed, retry = r.retry, is_paused = r.paused;
  ModelResult& stored = results[job.index] = std::move(static_cast<ModelResult&>(r));
  paused[job.index] = is_paused;
  if (recorded) keep_file(job.index);
  if (slot >= 0) {
    timeline_ended(slot, job);
    if (live) live->job_finished(slot, stored, is_paused, job.cost);
  }
  // A search decides now: from here on the job may be handed out again.
  std::vector<SearchScheduler::Pruned> pruned;
  if (search) {
    std::lock_guard<std::mutex> slock(search_mu);
    search->reached(job.index, stored.history, retry ? JobStatus::kCancelled : stored.status,
                    is_paused);
    pruned = search->advance();
  }
  // The history is in jobs.log now; only the summary stays in memory (a paused trial's stays
  // until it is pruned or trains on: a pruned trial's record is written with it).
  if (!opts.keep_history && !is_paused) {
    stored.history.clear();
    stored.history.shrink_to_fit();
  }
  if (recorded && !is_paused && opts.observer) opts.observer->on_model_end(stored);
  lock.unlock();
  // Its record holds the model now: a checkpoint left by a crash before this is never read.
  if (recorded && (!own_checkpoints_only || checkpointed))
    std::remove((dir + "/checkpoints/" + job.name() + ".ckpt").c_str());
  if (search) {
    prune(pruned);
    search_cv.notify_all();
    if (on_decision) on_decision();
  }
}

void RunState::timeline_started(int slot, const std::string& model) {
  if (timeline) timeline->job_started(model, slots.at(static_cast<size_t>(slot)), Timeline::now());
}

void RunState::timeline_ended(int slot, const PreparedJob& job) {
  if (timeline)
    timeline->job_ended(
        job.name(), slots.at(static_cast<size_t>(slot)), Timeline::now(),
        paused.at(job.index) ? "paused" : api::status_name(results.at(job.index).status));
}

}  // namespace nnfleet::fleet_detail
