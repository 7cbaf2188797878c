// Rank 0's coordinator (see coordinator.h and the protocol in protocol.h).
#include "fleet/cluster/coordinator.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "fleet/results.h"
#include "platform/files.h"

namespace nnfleet::fleet_detail {
namespace {

// Rank 0's file writer: files shipped by other ranks are written off the coordinator's thread,
// in arrival order, so a slow disk never delays handing out jobs.
class Writer {
 public:
  Writer() : thread_([this] { loop(); }) {}
  ~Writer() { finish(); }
  void push(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  // Writes what is queued, then stops.
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return done_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool done_ = false;
  std::thread thread_;
};

// Rank 0's coordinator: the handlers of every message another rank sends it.
class Coordinator {
 public:
  // How often rank 0 looks for messages when there were none: each look costs some 20 us of a
  // core its own workers need, and a worker waits half of it on average.
  static constexpr auto kPollEvery = std::chrono::microseconds(500);

  Coordinator(Cluster& cl, RunState& st, const std::vector<int>& slot_base, FleetSummary& sum)
      : cl_(cl), st_(st), slot_base_(slot_base), sum_(sum) {}

  void run(std::atomic<int>& local_workers) {
    const int remote = cl_.size() - 1;
    bool stop_sent = false;
    while (byes_ < remote || local_workers.load() > 0) {
      int from = 0;
      Tag tag{};
      std::string bytes;
      bool active = false;
      while (cl_.receive(from, tag, bytes)) {
        handle(from, tag, decode(bytes));
        active = true;
      }
      // Parked requests are asked again: a result stored meanwhile may have decided a rung.
      std::vector<std::pair<int, Json>> parked;
      parked.swap(parked_);
      for (const auto& [rank, head] : parked) assign(rank, head);
      cl_.sending();
      if (!stop_sent && st_.stopping()) {
        st_.stop = true;
        for (int r = 1; r < cl_.size(); ++r) cl_.send(r, Tag::kStop, encode(Packet{}));
        stop_sent = true;
      }
      if (!active) std::this_thread::sleep_for(kPollEvery);
    }
    writer_.finish();
    std::sort(rtt_.begin(), rtt_.end());
    RoundTrip& rt = sum_.round_trips;
    rt.count = rtt_.size();
    if (!rtt_.empty()) {
      double total = 0;
      for (double v : rtt_) total += v;
      rt.mean_us = total / static_cast<double>(rtt_.size());
      const size_t m = rtt_.size() / 2;
      rt.median_us = rtt_.size() % 2 ? rtt_[m] : 0.5 * (rtt_[m - 1] + rtt_[m]);
      rt.max_us = rtt_.back();
    }
  }

 private:
  int slot(int rank, const Json& head) const {
    return slot_base_[static_cast<size_t>(rank)] + head.at("w").get<int>();
  }
  PreparedJob& job(const Json& head) { return st_.jobs.at(head.at("job").get<size_t>()); }

  // Answers worker head["w"] of rank `from` with the next job (and its checkpoint) or none. In a
  // search, a request that must wait for a rung's decision is parked and answered later.
  void assign(int from, const Json& head) {
    bool wait = false;
    PreparedJob* j = st_.try_take(wait);
    if (!j && wait) {
      parked_.emplace_back(from, Json{{"w", head.at("w")}});
      return;
    }
    Packet a;
    a.head = {{"w", head.at("w")},
              {"job", j ? static_cast<int64_t>(j->index) : int64_t{-1}},
              {"live", st_.opts.mode == Display::Mode::kLive}};
    if (j) {
      a.head["limit"] = j->epoch_limit;
      a.head["pause"] = j->pause;
      const std::string ckpt = st_.dir + "/checkpoints/" + j->name() + ".ckpt";
      try {
        if (file_exists(ckpt)) a.blobs.push_back(read_file(ckpt));
      } catch (const Error&) {
        // Unreadable: the job starts over, to the same result.
      }
      // A finished job's end is displayed by the writer; its successor starts after it.
      const int s = slot(from, head);
      st_.timeline_started(s, j->name());
      // Held while the job runs elsewhere, for the display of its progress.
      j->spec = std::make_shared<const ModelSpec>(st_.plan.models.to_train(j->index));
      writer_.push(
          [this, spec = j->spec, cost = j->cost, s] { st_.live->job_started(s, *spec, cost); });
    }
    cl_.send(from, Tag::kAssign, encode(a));
  }

  void handle(int from, Tag tag, Packet p) {
    switch (tag) {
      case Tag::kRequest:
        assign(from, p.head);
        return;
      case Tag::kProgress: {
        const Json& h = p.head;
        st_.live->observer(slot(from, h))
            ->on_batch(*job(h).spec, h.at("epoch").get<int>(), h.at("batch").get<int>(),
                       h.at("batches").get<int>(), number(h.at("loss")), number(h.at("metric")),
                       number(h.at("sps")));
        return;
      }
      case Tag::kEpoch: {
        // Through the writer, like the job's start and end, so that lines keep their order.
        JobObserver* o = st_.live->observer(slot(from, p.head));
        writer_.push([o, spec = job(p.head).spec, rec = epoch_from_json(p.head.at("rec"))] {
          o->on_epoch(*spec, rec);
        });
        return;
      }
      case Tag::kCheckpoint: {
        const std::string path = st_.dir + "/checkpoints/" + job(p.head).name() + ".ckpt";
        writer_.push([path, bytes = std::move(p.blobs.at(0))] {
          try {
            write_file_atomic(path, bytes, Durability::kProcessCrash);
          } catch (const Error&) {
            // A lost checkpoint only means a resumed job starts from an earlier one.
          }
        });
        return;
      }
      case Tag::kResult: {
        PreparedJob* j = &job(p.head);
        std::vector<ShippedFile> files;
        const Json& paths = p.head.at("files");
        for (size_t i = 0; i < paths.size(); ++i)
          files.emplace_back(paths[i].get<std::string>(), std::move(p.blobs.at(i)));
        JobResult r = job_result_from_json(p.head.at("result"));
        const int s = slot(from, p.head);
        // The spec is dropped here, on this thread, which alone sets it (assign()): a search's
        // trial stored by the writer may be handed out again at once.
        j->spec.reset();
        writer_.push([this, j, s, r = std::move(r), files = std::move(files)]() mutable {
          st_.store(*j, std::move(r), files, "", 0, s);
        });
        // The result doubles as the worker's request for its next job.
        if (p.head.at("next").get<bool>()) assign(from, p.head);
        return;
      }
      case Tag::kStopped:
        st_.stop = true;
        return;
      case Tag::kBye: {
        RankSummary& r = sum_.ranks.at(static_cast<size_t>(from));
        const Json& h = p.head;
        r.jobs = h.at("jobs").get<int>();
        r.busy_seconds = h.at("busy").get<double>();
        r.peak_rss_bytes = h.at("peak_rss").get<size_t>();
        r.rss_private_bytes = h.at("rss_private").get<size_t>();
        r.rss_shared_bytes = h.at("rss_shared").get<size_t>();
        for (const auto& v : h.at("rtt_us")) rtt_.push_back(v.get<double>());
        ++byes_;
        return;
      }
      default:
        NNFLEET_CHECK(!"unexpected message on rank 0");
    }
  }

  Cluster& cl_;
  RunState& st_;
  const std::vector<int>& slot_base_;
  FleetSummary& sum_;
  Writer writer_;
  std::vector<double> rtt_;
  std::vector<std::pair<int, Json>> parked_;  // search requests waiting for a decision
  int byes_ = 0;
};

}  // namespace

void coordinate(Cluster& cluster, RunState& st, const std::vector<RankInfo>& ranks,
                const std::vector<int>& slot_base, std::atomic<int>& local_workers,
                FleetSummary& sum) {
  sum.ranks.clear();
  for (const RankInfo& i : ranks) {
    RankSummary r;
    r.rank = i.rank;
    r.host = i.host;
    r.cores = i.cores;
    r.loaded_data = i.loaded_data;
    sum.ranks.push_back(r);
  }
  Coordinator(cluster, st, slot_base, sum).run(local_workers);
}

void finish_cluster(Cluster& cluster, const std::vector<ModelResult>& results, bool interrupted,
                    int code) {
  Json statuses = Json::array();
  for (const auto& r : results) statuses.push_back(api::status_name(r.status));
  Packet f;
  f.head = {{"code", code}, {"interrupted", interrupted}, {"statuses", statuses}};
  const std::string bytes = encode(f);
  for (int r = 1; r < cluster.size(); ++r) cluster.send(r, Tag::kFinal, bytes);
  while (cluster.sending()) {
  }
}

}  // namespace nnfleet::fleet_detail
