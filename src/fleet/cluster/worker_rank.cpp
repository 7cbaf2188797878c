// The worker ranks of the cluster protocol (see worker_rank.h and protocol.h).
#include "fleet/cluster/worker_rank.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "fleet/cluster/protocol.h"
#include "fleet/results.h"
#include "fleet/run_state.h"
#include "fleet/worker.h"
#include "platform/files.h"
#include "platform/parallel.h"
#include "platform/test_hold.h"

namespace nnfleet::fleet_detail {
namespace {

using Clock = std::chrono::steady_clock;

// Folders of worker ranks are named <base>/nnfleet-rank<R>-<pid>.
const std::string kTempPrefix = "nnfleet-rank";

// Removes the folders that ranks killed earlier on this node left behind (their process is gone).
void remove_stale_folders(const std::filesystem::path& base) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(base, ec)) {
    const std::string name = e.path().filename().string();
    const size_t dash = name.rfind('-');
    if (name.rfind(kTempPrefix, 0) != 0 || dash == std::string::npos || dash + 1 >= name.size())
      continue;
    const std::string pid = name.substr(dash + 1);
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH)
      std::filesystem::remove_all(e.path(), ec);
  }
}

// A rank other than 0: pinned workers that take jobs from rank 0, and the main thread that
// carries their messages.
class WorkerRank {
 public:
  WorkerRank(Cluster& cl, const Plan& plan, const FleetOptions& opts, const ModelIo& io,
             const std::vector<FleetData>& data, const std::vector<int>& cores)
      : cl_(cl),
        plan_(plan),
        opts_(opts),
        io_(io),
        data_(data),
        cores_(cores),
        inbox_(cores.size()) {
    // Files are made in a folder of this rank's own (no file system is shared with rank 0).
    // In memory when the node has /dev/shm: model files are written there (with fsync) only to
    // be read back and shipped at once.
    try {
      const std::filesystem::path base = ::access("/dev/shm", W_OK | X_OK) == 0
                                             ? std::filesystem::path("/dev/shm")
                                             : std::filesystem::temp_directory_path();
      remove_stale_folders(base);
      tmp_ = (base / (kTempPrefix + std::to_string(cl.rank()) + "-" + std::to_string(::getpid())))
                 .string();
      std::filesystem::remove_all(tmp_);
      make_dirs(tmp_ + "/models");
      make_dirs(tmp_ + "/checkpoints");
      workers_ = static_cast<int>(cores.size());
    } catch (const std::exception& e) {
      // The run goes on without this rank's workers (rank 0 waits for every rank's goodbye).
      std::fprintf(stderr, "nnfleet: rank %d (%s): %s; this rank trains nothing\n", cl.rank(),
                   cl.host().c_str(), e.what());
    }
    running_ = workers_;
  }
  ~WorkerRank() {
    std::error_code ec;
    if (!tmp_.empty()) std::filesystem::remove_all(tmp_, ec);
  }

  Packet run() {
    std::optional<Packet> final;
    const std::vector<int> cores(cores_.begin(), cores_.begin() + workers_);
    run_pinned_workers(
        cores, [this](int w) { work(w); }, [&] { carry(final); });
    while (cl_.sending()) {
    }
    return *final;
  }

 private:
  // The main thread while the workers run: carries their messages to rank 0 and rank 0's to them
  // until rank 0's final word arrives.
  void carry(std::optional<Packet>& final) {
    bool bye_sent = false, stop_reported = false;
    while (!final) {
      std::deque<std::pair<Tag, std::string>> out;
      {
        std::lock_guard<std::mutex> lock(mu_);
        out.swap(outbox_);
      }
      for (auto& [tag, bytes] : out) cl_.send(0, tag, std::move(bytes));
      const bool sending = cl_.sending();
      int from = 0;
      Tag tag{};
      std::string bytes;
      while (cl_.receive(from, tag, bytes)) {
        if (tag == Tag::kAssign) {
          Packet a = decode(bytes);
          const size_t w = a.head.at("w").get<size_t>();
          live_ = a.head.at("live").get<bool>();
          {
            std::lock_guard<std::mutex> lock(mu_);
            inbox_.at(w) = std::move(a);
          }
          answered_.notify_all();
        } else if (tag == Tag::kStop) {
          stop_ = true;
        } else if (tag == Tag::kFinal) {
          final = decode(bytes);
        }
      }
      if (!stop_reported && opts_.stop && opts_.stop->load()) {
        stop_ = true;
        cl_.send(0, Tag::kStopped, encode(Packet{}));
        stop_reported = true;
      }
      std::unique_lock<std::mutex> lock(mu_);
      if (running_ == 0 && outbox_.empty() && !bye_sent) {
        lock.unlock();
        cl_.send(0, Tag::kBye, encode(bye()));
        bye_sent = true;
        continue;
      }
      if (waiting_ > 0 || sending) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      } else {
        queued_.wait_for(lock, std::chrono::milliseconds(5),
                         [&] { return !outbox_.empty() || (running_ == 0 && !bye_sent); });
      }
    }
  }

  // Queues a message for rank 0 (any thread).
  void post(Tag tag, const Packet& p) {
    std::string bytes = encode(p);
    {
      std::lock_guard<std::mutex> lock(mu_);
      outbox_.emplace_back(tag, std::move(bytes));
    }
    queued_.notify_one();
  }

  // Forwards a job's epochs, checkpoints and progress to rank 0. The checkpoint of an epoch is
  // written after the epoch is reported, so it is shipped with the next batch's report, and at
  // most every kShipEvery: tiny epochs are not worth a copy each. A run that asks for a
  // checkpoint more often (--checkpoint-seconds below a quarter second) has each one shipped.
  class Forwarder final : public JobObserver {
   public:
    static constexpr auto kShipEvery = std::chrono::milliseconds(250);
    Forwarder(WorkerRank& wr, int w) : wr_(wr), w_(w) {}
    void begin(int64_t job, std::string ckpt) {
      job_ = job;
      ckpt_ = std::move(ckpt);
      ckpt_due_ = false;
      last_progress_ = Clock::time_point{};
      last_ship_ = Clock::now();
    }
    void on_batch(const ModelSpec& spec, int epoch, int batch, int batches, double loss,
                  double metric, double sps) override {
      const auto now = Clock::now();
      const auto every = std::min<Clock::duration>(
          kShipEvery, std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(wr_.opts_.checkpoint_seconds)));
      if (ckpt_due_ && now - last_ship_ >= every) {
        last_ship_ = now;
        try {
          if (file_exists(ckpt_)) {
            Packet c;
            c.head = {{"job", job_}};
            c.blobs.push_back(read_file(ckpt_));
            wr_.post(Tag::kCheckpoint, c);
            // A test may hold the rank here, its checkpoint on the way to rank 0.
            test_hold::reach("checkpoint_shipped", spec.name, &wr_.stop_);
          }
        } catch (const Error&) {
          // Not shipped: a resumed job would start from an earlier checkpoint, to the same result.
        }
      }
      ckpt_due_ = false;
      if (!wr_.live_ || now - last_progress_ < std::chrono::milliseconds(250)) return;
      last_progress_ = now;
      Packet p;
      p.head = {{"w", w_},
                {"job", job_},
                {"epoch", epoch},
                {"batch", batch},
                {"batches", batches},
                {"loss", number(loss)},
                {"metric", number(metric)},
                {"sps", number(sps)}};
      wr_.post(Tag::kProgress, p);
    }
    void on_epoch(const ModelSpec&, const EpochRecord& rec) override {
      Packet p;
      p.head = {{"w", w_}, {"job", job_}, {"rec", epoch_to_json(rec)}};
      wr_.post(Tag::kEpoch, p);
      ckpt_due_ = true;
    }

   private:
    WorkerRank& wr_;
    int w_;
    int64_t job_ = -1;
    std::string ckpt_;
    bool ckpt_due_ = false;
    Clock::time_point last_progress_{}, last_ship_{};
  };

  // Sends `p` (a request, or a finished job's result that doubles as one) and waits for rank 0's
  // answer: the next job, or none.
  Packet request(int w, Tag tag, const Packet& p) {
    const auto t = Clock::now();
    std::string bytes = encode(p);
    std::unique_lock<std::mutex> lock(mu_);
    outbox_.emplace_back(tag, std::move(bytes));
    ++waiting_;
    queued_.notify_one();
    std::optional<Packet>& slot = inbox_[static_cast<size_t>(w)];
    answered_.wait(lock, [&] { return slot.has_value(); });
    Packet a = std::move(*slot);
    slot.reset();
    --waiting_;
    rtt_us_.push_back(us_since(t));
    return a;
  }

  // Trains job `index` (its checkpoint, if rank 0 sent one, in `a`) on worker `w`; `files` gets
  // what must be shipped with the result.
  JobResult train(int w, int64_t index, const Packet& a, Forwarder& fwd,
                  std::vector<ShippedFile>& files) {
    const int core = cores_[static_cast<size_t>(w)];
    const ModelSpec s = plan_.models.to_train(static_cast<size_t>(index));
    const std::string ckpt = tmp_ + "/checkpoints/" + s.name + ".ckpt";
    JobResult r;
    try {
      if (!a.blobs.empty()) write_file_atomic(ckpt, a.blobs[0], Durability::kProcessCrash);
      JobContext ctx;
      ctx.seed = plan_.seed;
      ctx.core = core;
      ctx.stop = &stop_;
      ctx.observer = &fwd;
      ctx.checkpoint_seconds = opts_.checkpoint_seconds;
      // A search's rung (RunState::take): rank 0 sent the trial's checkpoint when it has one.
      ctx.epoch_limit = a.head.value("limit", 0);
      ctx.pause_at_limit = a.head.value("pause", false);
      SavedModel saved;
      fwd.begin(index, ckpt);
      r = train_job(s, io_, data_[s.source], ctx, tmp_, saved);
      if (!saved.path.empty()) {
        files.emplace_back("models/" + std::filesystem::path(saved.path).filename().string(),
                           read_file(saved.path));
        std::filesystem::remove(saved.path);
      }
      if (r.status == JobStatus::kCancelled && file_exists(ckpt))
        files.emplace_back("checkpoints/" + s.name + ".ckpt", read_file(ckpt));
    } catch (const Error& e) {
      // This rank's own files (its checkpoint, its saved model): not final, tried again.
      r.name = s.name;
      r.core = core;
      r.status = JobStatus::kFailed;
      r.message = e.what();
      r.retry = true;
      files.clear();
    }
    std::remove(ckpt.c_str());
    return r;
  }

  void work(int w) {
    Forwarder fwd(*this, w);
    Packet ask;
    ask.head = {{"w", w}};
    Packet a = stop_.load() ? Packet{Json{{"job", -1}}, {}} : request(w, Tag::kRequest, ask);
    for (;;) {
      const int64_t index = a.head.at("job").get<int64_t>();
      if (index < 0) break;
      const auto t0 = Clock::now();
      std::vector<ShippedFile> files;
      const JobResult r = train(w, index, a, fwd, files);
      {
        std::lock_guard<std::mutex> lock(mu_);
        busy_ += std::chrono::duration<double>(Clock::now() - t0).count();
        ++jobs_;
      }
      Packet res;
      Json paths = Json::array();
      for (auto& [path, bytes] : files) {
        paths.push_back(path);
        res.blobs.push_back(std::move(bytes));
      }
      const bool next = !stop_.load();
      res.head = {{"w", w},
                  {"job", index},
                  {"result", job_result_to_json(r)},
                  {"files", paths},
                  {"next", next}};
      if (!next) {
        post(Tag::kResult, res);
        break;
      }
      a = request(w, Tag::kResult, res);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
    queued_.notify_one();
  }

  Packet bye() {
    RankSummary m;
    measure_memory(m);
    Packet p;
    std::lock_guard<std::mutex> lock(mu_);
    p.head = {{"jobs", jobs_},
              {"busy", busy_},
              {"peak_rss", m.peak_rss_bytes},
              {"rss_private", m.rss_private_bytes},
              {"rss_shared", m.rss_shared_bytes},
              {"rtt_us", rtt_us_}};
    return p;
  }

  Cluster& cl_;
  const Plan& plan_;
  const FleetOptions& opts_;
  const ModelIo& io_;
  const std::vector<FleetData>& data_;  // Plan::sources, in order
  const std::vector<int>& cores_;
  std::string tmp_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> live_{false};
  std::mutex mu_;
  std::condition_variable queued_;    // the main thread: a message to send, or a worker ended
  std::condition_variable answered_;  // the workers: an answer from rank 0 arrived
  std::deque<std::pair<Tag, std::string>> outbox_;
  std::vector<std::optional<Packet>> inbox_;  // per worker
  int workers_ = 0;
  int waiting_ = 0;  // workers waiting for an answer
  int running_ = 0;  // workers not yet finished
  int jobs_ = 0;
  double busy_ = 0;
  std::vector<double> rtt_us_;
};

}  // namespace

FleetSummary run_worker_rank(Cluster& cluster, const Plan& plan, const FleetOptions& opts,
                             const ModelIo& io, const std::vector<FleetData>& data,
                             const std::vector<int>& cores) {
  // save: none writes no model file here either (rank 0 keeps a best N's top N).
  ModelIo own_io = io;
  if (plan.save.resolved(plan.models.size()).kind == SavePolicy::Kind::kNone) own_io.save = nullptr;
  Packet final = WorkerRank(cluster, plan, opts, own_io, data, cores).run();
  if (final.head.at("code").get<int>() != 0) throw PeerExit();
  FleetSummary sum;
  sum.rank = cluster.rank();
  sum.interrupted = final.head.at("interrupted").get<bool>();
  const Json& statuses = final.head.at("statuses");
  for (size_t i = 0; i < plan.models.size() && i < statuses.size(); ++i) {
    ModelResult& r = sum.results.emplace_back();
    r.name = plan.models.name(i);
    r.status = job_status_from_name(statuses[i].get<std::string>());
  }
  return sum;
}

}  // namespace nnfleet::fleet_detail
