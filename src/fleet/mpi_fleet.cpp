// The fleet's cluster protocol (see mpi_fleet.h): rank 0's coordinator and the worker ranks.
//
// Messages are packets: a JSON head and a list of byte blobs (checkpoint and model files). A
// worker asks for a job (kRequest); rank 0 answers with the index of the next queue entry in
// plan order, or -1 when there is none, plus the job's checkpoint from the output folder when a
// resumed run has one (kAssign). While it trains, the worker reports finished epochs (kEpoch),
// the checkpoint file written after an epoch when a quarter second has passed since the last one
// it shipped (kCheckpoint) and, for the live display, progress (kProgress); at the end the result
// record with its history and the saved model file (kResult), which also asks for the next job.
// So an unfinished job resumes, on any rank, from a checkpoint at most an epoch and a quarter
// second old. Messages from one rank arrive in the order they were sent, so rank 0 writes a job's
// files in the order a local worker does, its record (which --resume trusts) last; its file
// writer also prints the job's lines, in order.
//
// Only the main thread of a rank calls MPI. It polls: MPI's blocking calls spin, and a spinning
// thread would take a core from the pinned workers. Rank 0 looks every kPollEvery (500 us) when
// nothing came; a worker rank sleeps on a condition variable until a worker has something to
// send (or 5 ms have passed) and polls every 20 us only while a worker waits for an answer or a
// send is under way.
#include "fleet/mpi_fleet.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include "fleet/fine_tune.h"
#include "fleet/results.h"
#include "platform/cpu.h"
#include "platform/files.h"
#include "tensor/rng.h"

namespace nnfleet::fleet_detail {
namespace {

using Clock = std::chrono::steady_clock;

struct Packet {
  Json head = Json::object();
  std::vector<std::string> blobs;
};

void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }

std::string encode(const Packet& p) {
  const std::string head = p.head.dump();
  size_t n = 16 + head.size();
  for (const auto& b : p.blobs) n += 8 + b.size();
  std::string s;
  s.reserve(n);
  put_u64(s, head.size());
  s += head;
  put_u64(s, p.blobs.size());
  for (const auto& b : p.blobs) {
    put_u64(s, b.size());
    s += b;
  }
  return s;
}

Packet decode(const std::string& s) {
  size_t at = 0;
  auto u64 = [&] {
    NNFLEET_CHECK(at + 8 <= s.size());
    uint64_t v;
    std::memcpy(&v, s.data() + at, 8);
    at += 8;
    return v;
  };
  auto bytes = [&](uint64_t n) {
    NNFLEET_CHECK(n <= s.size() - at);
    std::string b = s.substr(at, n);
    at += n;
    return b;
  };
  Packet p;
  p.head = Json::parse(bytes(u64()));
  const uint64_t blobs = u64();
  for (uint64_t i = 0; i < blobs; ++i) p.blobs.push_back(bytes(u64()));
  return p;
}

// JSON has no NaN: losses that became NaN travel as null.
Json number(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }
double number(const Json& j) { return j.is_null() ? NAN : j.get<double>(); }

Json epoch_to_json(const EpochRecord& r) {
  Json values = Json::array();
  for (const auto& [k, v] : r.values) values.push_back(Json::array({k, number(v)}));
  return {{"epoch", r.epoch}, {"seconds", r.seconds}, {"values", values}};
}

EpochRecord epoch_from_json(const Json& j) {
  EpochRecord r;
  r.epoch = j.at("epoch").get<int>();
  r.seconds = j.at("seconds").get<double>();
  for (const auto& kv : j.at("values"))
    r.values.emplace_back(kv[0].get<std::string>(), number(kv[1]));
  return r;
}

// Mixes 8 bytes at a time into four independent lanes (fast enough to hash a data set of a few
// hundred MB in well under a second); only used to see that every node loaded the same data.
uint64_t hash_bytes(const void* data, size_t n, uint64_t seed) {
  constexpr uint64_t k1 = 0x9E3779B97F4A7C15ull, k2 = 0xC2B2AE3D27D4EB4Full;
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lane[4] = {seed, seed ^ k1, seed ^ k2, seed ^ (k1 * k2)};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      lane[k] = ((lane[k] ^ (w * k1)) << 31 | (lane[k] ^ (w * k1)) >> 33) * k2;
    }
  uint64_t h = static_cast<uint64_t>(n);
  for (uint64_t l : lane) h = (h ^ l) * k1;
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

uint64_t hash_array(const Array& a, uint64_t h) {
  h = (h ^ static_cast<uint64_t>(a.dtype())) * 0x100000001b3ull;
  for (int64_t d : a.shape()) h = (h ^ static_cast<uint64_t>(d)) * 0x100000001b3ull;
  return hash_bytes(a.data(), a.size_bytes(), h);
}

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

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
    RoundTrip& rt = sum_.round_trip;
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

  // Answers worker head["w"] of rank `from` with the next job (and its checkpoint) or none.
  void assign(int from, const Json& head) {
    PreparedJob* j = st_.take();
    Packet a;
    a.head = {{"w", head.at("w")},
              {"job", j ? static_cast<int64_t>(j->index) : int64_t{-1}},
              {"live", st_.opts.mode == Display::Mode::kLive}};
    if (j) {
      const std::string ckpt = st_.dir + "/checkpoints/" + j->spec->name + ".ckpt";
      try {
        if (file_exists(ckpt)) a.blobs.push_back(read_file(ckpt));
      } catch (const Error&) {
        // Unreadable: the job starts over, to the same result.
      }
      // A finished job's end is displayed by the writer; its successor starts after it.
      const int s = slot(from, head);
      st_.timeline_started(s, j->spec->name);
      writer_.push([this, j, s] { st_.live->job_started(s, *j->spec, j->cost); });
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
        const std::string path = st_.dir + "/checkpoints/" + job(p.head).spec->name + ".ckpt";
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
        writer_.push([this, j, s, r = std::move(r), files = std::move(files)]() mutable {
          st_.store(*j, std::move(r), files);
          st_.timeline_ended(s, *j);
          st_.live->job_finished(s, st_.results[j->index], j->cost);
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
        r.peak_rss = h.at("peak_rss").get<size_t>();
        r.rss_private = h.at("rss_private").get<size_t>();
        r.rss_shared = h.at("rss_shared").get<size_t>();
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
  int byes_ = 0;
};

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
    std::vector<std::thread> threads;
    for (int w = 0; w < workers_; ++w) threads.emplace_back([this, w] { work(w); });
    std::optional<Packet> final;
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
    for (auto& t : threads) t.join();
    while (cl_.sending()) {
    }
    return *final;
  }

 private:
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
  // most every kShipEvery: tiny epochs are not worth a copy each.
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
    void on_batch(const ModelSpec&, int epoch, int batch, int batches, double loss, double metric,
                  double sps) override {
      const auto now = Clock::now();
      if (ckpt_due_ && now - last_ship_ >= kShipEvery) {
        last_ship_ = now;
        try {
          if (file_exists(ckpt_)) {
            Packet c;
            c.head = {{"job", job_}};
            c.blobs.push_back(read_file(ckpt_));
            wr_.post(Tag::kCheckpoint, c);
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

  void work(int w) {
    const int core = cores_[static_cast<size_t>(w)];
    pin_this_thread(core);
    Forwarder fwd(*this, w);
    Packet ask;
    ask.head = {{"w", w}};
    Packet a = stop_.load() ? Packet{Json{{"job", -1}}, {}} : request(w, Tag::kRequest, ask);
    for (;;) {
      const int64_t index = a.head.at("job").get<int64_t>();
      if (index < 0) break;
      const ModelSpec& s = plan_.models.at(static_cast<size_t>(index));
      const std::string ckpt = tmp_ + "/checkpoints/" + s.name + ".ckpt";
      const auto t0 = Clock::now();
      JobResult r;
      std::vector<ShippedFile> files;
      try {
        if (!a.blobs.empty()) write_file_atomic(ckpt, a.blobs[0], Durability::kProcessCrash);
        std::vector<float> initial;
        std::shared_ptr<const Model> model;
        const FleetData& data = data_[s.source];
        if (s.keras.empty())
          model = build_model(s, data.input_shape);
        else if (io_.load)
          model = apply_fine_tuning(s, io_.load(s, data.input_shape, initial), initial);
        else
          throw ModelError("models from Keras files are not available in this build");
        RestoredOptimizer restored;
        if (s.restore_optimizer && io_.optimizer) restored = io_.optimizer(s, data.input_shape);
        JobContext ctx;
        ctx.seed = plan_.seed;
        ctx.core = core;
        ctx.stop = &stop_;
        ctx.observer = &fwd;
        ctx.checkpoint_path = ckpt;
        if (s.restore_optimizer) ctx.restored_optimizer = &restored;
        ctx.checkpoint_seconds = opts_.checkpoint_seconds;
        std::string saved;
        if (io_.save)
          ctx.save_model = [&](const Network& net, const ModelSpec& sp) {
            saved = io_.save(net, sp, tmp_ + "/models/" + sp.name);
          };
        fwd.begin(index, ckpt);
        r = run_job(s, model, data, ctx, initial.empty() ? nullptr : &initial);
        if (!saved.empty()) {
          files.emplace_back("models/" + std::filesystem::path(saved).filename().string(),
                             read_file(saved));
          std::filesystem::remove(saved);
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
              {"peak_rss", m.peak_rss},
              {"rss_private", m.rss_private},
              {"rss_shared", m.rss_shared},
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

Json RankInfo::to_json() const {
  return {{"rank", rank},           {"host", host},
          {"cores", cores},         {"loaded_data", loaded_data},
          {"plan_hash", plan_hash}, {"data_hash", data_hash}};
}

RankInfo RankInfo::from_json(const Json& j) {
  RankInfo r;
  r.rank = j.at("rank").get<int>();
  r.host = j.at("host").get<std::string>();
  r.cores = j.at("cores").get<std::vector<int>>();
  r.loaded_data = j.at("loaded_data").get<bool>();
  r.plan_hash = j.at("plan_hash").get<uint64_t>();
  r.data_hash = j.at("data_hash").get<uint64_t>();
  return r;
}

uint64_t plan_hash(const Plan& plan) {
  uint64_t h = hash_name(std::to_string(plan.seed));
  for (const auto& m : plan.models) h = (h ^ hash_name(m.expanded)) * 0x100000001b3ull;
  return h;
}

uint64_t data_hash(const std::vector<FleetData>& sources) {
  uint64_t h = hash_name(std::to_string(sources.size()));
  for (const FleetData& d : sources) {
    h = (h ^ hash_name(std::to_string(d.scale) + "/" + std::to_string(d.n_train) + "/" +
                       std::to_string(d.n_val))) *
        0x100000001b3ull;
    h = hash_array(d.train.x, h);
    h = hash_array(d.train.y, h);
    if (d.test) {
      h = hash_array(d.test->x, h);
      h = hash_array(d.test->y, h);
    }
  }
  return h | 1;  // never 0, which means "not computed"
}

void measure_memory(RankSummary& r) {
  r.peak_rss = peak_rss_bytes();
  std::ifstream f("/proc/self/status");
  std::string key;
  size_t kb = 0;
  while (f >> key) {
    if (key == "RssAnon:" && f >> kb) r.rss_private = kb * 1024;
    if (key == "RssShmem:" && f >> kb) r.rss_shared = kb * 1024;
  }
}

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

void finish_cluster(Cluster& cluster, const std::vector<JobResult>& results, bool interrupted,
                    int code) {
  Json statuses = Json::array();
  for (const auto& r : results) statuses.push_back(job_status_name(r.status));
  Packet f;
  f.head = {{"code", code}, {"interrupted", interrupted}, {"statuses", statuses}};
  const std::string bytes = encode(f);
  for (int r = 1; r < cluster.size(); ++r) cluster.send(r, Tag::kFinal, bytes);
  while (cluster.sending()) {
  }
}

FleetSummary run_worker_rank(Cluster& cluster, const Plan& plan, const FleetOptions& opts,
                             const ModelIo& io, const std::vector<FleetData>& data,
                             const std::vector<int>& cores) {
  Packet final = WorkerRank(cluster, plan, opts, io, data, cores).run();
  if (final.head.at("code").get<int>() != 0) throw PeerExit();
  FleetSummary sum;
  sum.rank = cluster.rank();
  sum.interrupted = final.head.at("interrupted").get<bool>();
  const Json& statuses = final.head.at("statuses");
  for (size_t i = 0; i < plan.models.size() && i < statuses.size(); ++i) {
    JobResult r;
    r.name = plan.models[i].name;
    r.status = job_status_from_name(statuses[i].get<std::string>());
    sum.results.push_back(r);
  }
  return sum;
}

}  // namespace nnfleet::fleet_detail
