// Display: live terminal view, epoch lines, JSON events and run.log.
#include "fleet/display.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "platform/cpu.h"

namespace nnfleet {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string bar(double frac, int width) {
  frac = std::clamp(frac, 0.0, 1.0);
  const int full = static_cast<int>(frac * width + 0.5);
  std::string b(static_cast<size_t>(width) + 2, '.');
  b.front() = '[';
  b.back() = ']';
  for (int i = 1; i <= full; ++i) b[static_cast<size_t>(i)] = '#';
  return b;
}

std::string duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--";
  char b[32];
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600)
    std::snprintf(b, sizeof b, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60)
    std::snprintf(b, sizeof b, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(b, sizeof b, "%lds", t);
  return b;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string epoch_line(const ModelSpec& spec, const EpochRecord& rec) {
  std::string s =
      spec.name + " epoch " + std::to_string(rec.epoch) + "/" + std::to_string(spec.epochs);
  for (const auto& [k, v] : rec.values) s += " " + k + "=" + fmt("%.4f", v);
  return s + " (" + fmt("%.1f", rec.seconds) + "s)";
}

}  // namespace

class Display::WorkerObserver final : public JobObserver {
 public:
  WorkerObserver(Display* d, int w) : d_(d), w_(w) {}
  void on_batch(const ModelSpec&, int epoch, int batch, int batches, double loss, double metric,
                double sps) override {
    if (!d_->first_step_seen_.exchange(true)) {
      const double age = process_age_seconds();
      d_->note("first training step done " + fmt("%.3f", age) + " s after launch",
               {{"event", "first_step"}, {"seconds_since_launch", age}});
    }
    if (d_->mode_ != Mode::kLive) return;
    std::lock_guard<std::mutex> lock(d_->mu_);
    Slot& s = d_->slots_[static_cast<size_t>(w_)];
    s.epoch = epoch;
    s.batch = batch;
    s.batches = batches;
    s.loss = loss;
    s.metric = metric;
    s.sps = sps;
  }
  void on_epoch(const ModelSpec& spec, const EpochRecord& rec) override {
    if (d_->brief_ && d_->mode_ != Mode::kJson) return;
    // The JSON event is made only when it is printed: for each epoch, start and end of 100,000
    // tiny models it was a tree of a dozen allocations, built and dropped (issue 36).
    Json ev;
    if (d_->mode_ == Mode::kJson) {
      ev = {{"event", "epoch"},
            {"model", spec.name},
            {"epoch", rec.epoch},
            {"epochs", spec.epochs},
            {"seconds", rec.seconds}};
      for (const auto& [k, v] : rec.values) ev[k] = std::isfinite(v) ? Json(v) : Json(nullptr);
    }
    d_->note(epoch_line(spec, rec), ev, !d_->brief_);
  }

 private:
  Display* d_;
  int w_;
};

Display::Display(Mode mode, std::vector<int> cores, size_t total_jobs, size_t done_jobs,
                 double total_cost, double done_cost, const std::string& log_path)
    : mode_(mode),
      cores_(std::move(cores)),
      total_(total_jobs),
      done_(done_jobs),
      total_cost_(total_cost),
      done_cost_(done_cost),
      slots_(cores_.size()),
      brief_(total_jobs > kBriefAbove) {
  if (!log_path.empty()) log_ = std::fopen(log_path.c_str(), "a");
  for (size_t i = 0; i < cores_.size(); ++i)
    observers_.push_back(std::make_unique<WorkerObserver>(this, static_cast<int>(i)));
  t0_ = now_seconds();
}

Display::~Display() {
  stop();
  if (log_) std::fclose(log_);
}

JobObserver* Display::observer(int worker) { return observers_[static_cast<size_t>(worker)].get(); }

void Display::set_ranks(std::vector<int> ranks) { ranks_ = std::move(ranks); }

std::string Display::where(int worker) const {
  const size_t w = static_cast<size_t>(worker);
  const std::string core = "core " + std::to_string(cores_[w]);
  return ranks_.empty() ? core : "rank " + std::to_string(ranks_[w]) + " " + core;
}

void Display::start() {
  if (mode_ == Mode::kLive) thread_ = std::thread([this] { loop(); });
}

void Display::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (mode_ == Mode::kLive) {
    std::lock_guard<std::mutex> lock(mu_);
    redraw_locked(true);
  }
}

void Display::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    redraw_locked(false);
    cv_.wait_for(lock, std::chrono::milliseconds(200));
  }
}

void Display::emit(const std::string& line, const Json& event, bool text) {
  if (!text && mode_ != Mode::kJson) return;
  if (log_ && text) {
    std::fprintf(log_, "%s\n", line.c_str());
    std::fflush(log_);
  }
  switch (mode_) {
    case Mode::kQuiet:
      return;
    case Mode::kJson:
      std::fprintf(stdout, "%s\n", event.dump().c_str());
      std::fflush(stdout);
      return;
    case Mode::kLines:
      std::fprintf(stdout, "%s\n", line.c_str());
      std::fflush(stdout);
      return;
    case Mode::kLive:
      // Clear the live block, print the line above it; the block is redrawn next tick.
      for (int i = 0; i < drawn_lines_; ++i) std::fputs("\x1b[1A\x1b[2K", stdout);
      drawn_lines_ = 0;
      std::fprintf(stdout, "%s\n", line.c_str());
      redraw_locked(false);
      return;
  }
}

void Display::note(const std::string& line, const Json& event, bool text) {
  std::lock_guard<std::mutex> lock(mu_);
  emit(line, event, text);
}

void Display::progress_locked() {
  const size_t step = std::max<size_t>(1, total_ / 100);
  if (done_ % step != 0 && done_ != total_) return;
  const std::string line = "done " + std::to_string(done_) + "/" + std::to_string(total_) +
                           " models, " + duration(now_seconds() - t0_);
  if (log_) {
    std::fprintf(log_, "%s\n", line.c_str());
    std::fflush(log_);
  }
  if (mode_ == Mode::kLines) {
    std::fprintf(stdout, "%s\n", line.c_str());
    std::fflush(stdout);
  }
}

void Display::job_started(int worker, const ModelSpec& spec, double cost) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slots_[static_cast<size_t>(worker)];
  s = Slot{};
  s.model = spec.name;
  s.metric_name = spec.metrics.empty() ? "" : metric_key(spec.metrics[0]);
  s.epochs = spec.epochs;
  s.cost = cost;
  s.busy = true;
  Json ev;
  if (mode_ == Mode::kJson) {
    ev = {{"event", "start"}, {"model", spec.name}, {"core", cores_[static_cast<size_t>(worker)]}};
    if (!ranks_.empty()) ev["rank"] = ranks_[static_cast<size_t>(worker)];
  }
  if (!brief_ || mode_ == Mode::kJson)
    emit("start " + spec.name + " on " + where(worker), ev, !brief_);
}

void Display::job_pruned(const ModelResult& r, double cost) {
  std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  done_cost_ += cost;
  emit("pruned " + r.name + ": " + r.message, {{"event", "pruned"},
                                               {"model", r.name},
                                               {"message", r.message},
                                               {"epochs", r.epochs},
                                               {"done", done_},
                                               {"total", total_}});
}

void Display::job_finished(int worker, const ModelResult& r, bool paused, double cost) {
  std::lock_guard<std::mutex> lock(mu_);
  slots_[static_cast<size_t>(worker)].busy = false;
  if (paused) {
    std::string line = "rung " + r.name + " paused after " + std::to_string(r.epochs) +
                       " epoch(s), " + fmt("%.1f", r.seconds) + "s";
    Json ev = {{"event", "paused"}, {"model", r.name}, {"epochs", r.epochs}};
    for (const auto& [k, v] : r.metrics) {
      if (k.rfind("val_", 0) == 0) line += " " + k + "=" + fmt("%.4f", v);
      ev[k] = std::isfinite(v) ? Json(v) : Json(nullptr);
    }
    emit(line, ev);
    return;
  }
  if (r.status != JobStatus::kCancelled) {
    ++done_;
    done_cost_ += cost;
  }
  std::string line = "end " + r.name + " " + api::status_name(r.status) + " after " +
                     std::to_string(r.epochs) + " epoch(s), " + fmt("%.1f", r.seconds) + "s";
  for (const auto& [k, v] : r.metrics)
    if (k.rfind("test_", 0) == 0) line += " " + k + "=" + fmt("%.4f", v);
  if (!r.message.empty()) line += ": " + r.message;
  Json ev;
  if (mode_ == Mode::kJson) {
    ev = {{"event", "end"},       {"model", r.name},    {"status", api::status_name(r.status)},
          {"message", r.message}, {"epochs", r.epochs}, {"seconds", r.seconds},
          {"done", done_},        {"total", total_}};
    for (const auto& [k, v] : r.metrics) ev[k] = std::isfinite(v) ? Json(v) : Json(nullptr);
  }
  // A brief() run's failures keep their line: they are what the user looks for.
  const bool text = !brief_ || r.status != JobStatus::kDone;
  emit(line, ev, text);
  if (brief_ && r.status != JobStatus::kCancelled) progress_locked();
}

void Display::helping(int worker, bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  slots_[static_cast<size_t>(worker)].helping = on;
}

void Display::redraw_locked(bool final) {
  for (int i = 0; i < drawn_lines_; ++i) std::fputs("\x1b[1A\x1b[2K", stdout);
  drawn_lines_ = 0;
  if (final) {
    std::fflush(stdout);
    return;
  }
  double running = 0.0;
  for (const Slot& s : slots_) {
    std::string row;
    const std::string core = where(static_cast<int>(&s - slots_.data()));
    if (!s.busy) {
      row = core +
            (s.helping ? "  helping the running models with pieces of their batches" : "  idle");
    } else {
      const double frac =
          s.batches && s.epochs
              ? ((s.epoch - 1) + static_cast<double>(s.batch) / s.batches) / s.epochs
              : 0.0;
      running += frac * s.cost;
      const double in_epoch = s.batches ? static_cast<double>(s.batch) / s.batches : 0.0;
      char b[320];
      std::snprintf(b, sizeof b, "%s  %-24.24s epoch %d/%d %s loss %.4f", core.c_str(),
                    s.model.c_str(), s.epoch, s.epochs, bar(in_epoch, 20).c_str(), s.loss);
      row = b;
      if (!s.metric_name.empty() && std::isfinite(s.metric))
        row += "  " + s.metric_name + " " + fmt("%.4f", s.metric);
      row += "  " + fmt("%.0f", s.sps) + " samples/s";
    }
    std::fprintf(stdout, "%s\n", row.c_str());
    ++drawn_lines_;
  }
  const double elapsed = now_seconds() - t0_;
  const double progress = total_cost_ > 0 ? (done_cost_ + running) / total_cost_ : 0.0;
  const double eta = progress > 0.001 ? elapsed * (1.0 - progress) / progress : NAN;
  std::fprintf(stdout, "all    %s %zu/%zu models done  elapsed %s  ETA %s\n",
               bar(progress, 30).c_str(), done_, total_, duration(elapsed).c_str(),
               duration(eta).c_str());
  ++drawn_lines_;
  std::fflush(stdout);
}

}  // namespace nnfleet
