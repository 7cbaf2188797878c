// The Cluster over Open MPI: start-up and shutdown, agreement on errors, the node-shared data
// window, CPU sharing between ranks of a node, and buffered point-to-point messages. Compiled
// only with NNFLEET_MPI; every MPI call of nnfleet is in this file. An MPI failure aborts the whole
// job (MPI's default error handler); the output folder stays resumable.
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <list>

#include "fleet/cluster/cluster.h"

namespace nnfleet {
namespace {

Json labels_json(const LabelStats& l) {
  return {{"integral", l.integral}, {"min", l.min}, {"max", l.max}};
}

LabelStats labels_from_json(const Json& j) {
  return {j.at("integral").get<bool>(), j.at("min").get<double>(), j.at("max").get<double>()};
}

// Tags outside the fleet protocol's range.
constexpr int kAgreeTag = 100;  // a failing rank's message to rank 0
constexpr int kBigTag = 101;    // announces a message sent in pieces: {tag, total bytes}
constexpr int kPieceTag = 102;  // one piece of it
constexpr size_t kMaxPiece = size_t{1} << 30;  // MPI counts are ints

// Error classes carried by agree(), so rank 0 rethrows what the failing rank threw.
enum ErrorClass : int { kOk = 0, kPlan, kData, kModel, kFile, kUsage, kOther };

int classify(const Error& e) {
  if (dynamic_cast<const UsageError*>(&e)) return kUsage;
  if (dynamic_cast<const PlanError*>(&e)) return kPlan;
  if (dynamic_cast<const DataError*>(&e)) return kData;
  if (dynamic_cast<const ModelError*>(&e)) return kModel;
  if (dynamic_cast<const FileError*>(&e)) return kFile;
  return kOther;
}

[[noreturn]] void throw_class(int c, const std::string& msg) {
  switch (c) {
    case kPlan:
      throw PlanError(msg);
    case kData:
      throw DataError(msg);
    case kModel:
      throw ModelError(msg);
    case kFile:
      throw FileError(msg);
    case kUsage:
      throw UsageError(msg);
    default:
      throw Error(msg);
  }
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

int int_count(size_t n) {
  NNFLEET_CHECK(n <= static_cast<size_t>(INT32_MAX));
  return static_cast<int>(n);
}

class MpiCluster final : public Cluster {
 public:
  MpiCluster() {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw Error("failed to start MPI: MPI_Init_thread failed");
    // Worker threads exist next to MPI (they never call it): the library must allow that.
    if (provided < MPI_THREAD_FUNNELED) {
      MPI_Finalize();
      throw Error(
          "failed to start MPI: the library does not support threads; expected "
          "MPI_THREAD_FUNNELED, got level " +
          std::to_string(provided));
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_);
    MPI_Comm_rank(node_, &node_rank_);
    MPI_Comm_size(node_, &node_size_);
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    host_.assign(name, static_cast<size_t>(len));
  }

  ~MpiCluster() override {
    // Wait for queued sends (their buffers are ours), then free the windows: collective over the
    // node, and every Array that points into them must be gone by now.
    while (sending()) {
    }
    for (auto& w : windows_) {
      NNFLEET_CHECK(w.token.use_count() == 1);
      MPI_Win_free(&w.win);
    }
    MPI_Comm_free(&node_);
    MPI_Comm_free(&comm_);
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& host() const override { return host_; }

  void agree(const std::function<void()>& step) override {
    int mine = kOk;
    std::string msg;
    std::exception_ptr own;
    try {
      step();
    } catch (const Error& e) {
      mine = classify(e);
      msg = e.what();
      own = std::current_exception();
    } catch (const std::exception& e) {
      // Not a user error, but the other ranks must not wait for this one forever either.
      mine = kOther;
      msg = e.what();
      own = std::current_exception();
    }
    std::vector<int> all(static_cast<size_t>(size_));
    MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, comm_);
    const auto bad = std::find_if(all.begin(), all.end(), [](int c) { return c != kOk; });
    if (bad == all.end()) return;
    const int first = static_cast<int>(bad - all.begin());
    if (rank_ == 0) {
      if (own) std::rethrow_exception(own);
      MPI_Status st;
      MPI_Probe(first, kAgreeTag, comm_, &st);
      int n = 0;
      MPI_Get_count(&st, MPI_CHAR, &n);
      std::string text(static_cast<size_t>(n), '\0');
      MPI_Recv(text.data(), n, MPI_CHAR, first, kAgreeTag, comm_, MPI_STATUS_IGNORE);
      throw_class(all[static_cast<size_t>(first)], text);
    }
    if (rank_ == first && all[0] == kOk) {
      const std::string text = "on rank " + std::to_string(rank_) + " (" + host_ + "): " + msg;
      MPI_Send(text.data(), int_count(text.size()), MPI_CHAR, 0, kAgreeTag, comm_);
    }
    throw PeerExit();
  }

  FleetData load_shared_data(const DataSpec& spec, const GivenArrays* given,
                             bool& loaded_here) override {
    // The shared window carries x and y only (the same answer on every rank, before any load).
    if (!spec.train.sample_weight.empty() || (spec.test && !spec.test->sample_weight.empty()) ||
        (spec.validation && !spec.validation->sample_weight.empty()))
      throw DataError(spec.where + (spec.where.empty() ? "" : ": ") + "failed to share data " +
                      describe_source(spec.train) +
                      " across MPI ranks: sample_weight sources are not shared yet; expected a "
                      "source without sample_weight under MPI (run without MPI to use it)");
    const bool leader = node_rank_ == 0;
    FleetData d;
    agree([&] {
      if (leader) d = load_fleet_data(spec, given);
    });
    loaded_here = leader;
    if (node_size_ == 1) return d;

    // The leader lays the arrays out in one window (64-byte aligned) and describes them.
    Array* parts[4] = {&d.train.x, &d.train.y, d.test ? &d.test->x : nullptr,
                       d.test ? &d.test->y : nullptr};
    size_t total = 0;
    std::vector<size_t> offsets(4, 0);
    if (leader)
      for (int i = 0; i < 4; ++i)
        if (parts[i]) {
          offsets[static_cast<size_t>(i)] = (total + 63) / 64 * 64;
          total = offsets[static_cast<size_t>(i)] + parts[i]->size_bytes();
        }
    Window w;
    char* base = nullptr;
    MPI_Win_allocate_shared(static_cast<MPI_Aint>(leader ? std::max<size_t>(total, 1) : 0), 1,
                            MPI_INFO_NULL, node_, &base, &w.win);
    if (!leader) {
      MPI_Aint bytes = 0;
      int unit = 0;
      MPI_Win_shared_query(w.win, 0, &bytes, &unit, &base);
    }
    std::string desc;
    MPI_Win_lock_all(MPI_MODE_NOCHECK, w.win);
    if (leader) {
      Json arrays = Json::array();
      for (int i = 0; i < 4; ++i) {
        if (!parts[i]) {
          arrays.push_back(nullptr);
          continue;
        }
        std::memcpy(base + offsets[static_cast<size_t>(i)], parts[i]->data(),
                    parts[i]->size_bytes());
        Json shape = Json::array();
        for (int64_t s : parts[i]->shape()) shape.push_back(s);
        arrays.push_back({{"dtype", static_cast<int>(parts[i]->dtype())},
                          {"shape", shape},
                          {"offset", offsets[static_cast<size_t>(i)]}});
      }
      desc = Json{{"arrays", arrays},
                  {"scale", d.scale},
                  {"n_train", d.n_train},
                  {"n_val", d.n_val},
                  {"train_labels", labels_json(d.train_labels)},
                  {"test_labels", labels_json(d.test_labels)},
                  {"train_name", d.train_name},
                  {"test_name", d.test_name}}
                 .dump();
    }
    MPI_Win_sync(w.win);
    MPI_Barrier(node_);
    MPI_Win_sync(w.win);
    MPI_Win_unlock_all(w.win);
    broadcast_node(desc);

    // Every rank (the leader too, dropping its private copy) reads the window from here on.
    const Json j = Json::parse(desc);
    w.token = std::make_shared<int>(0);
    auto array = [&](const Json& a) {
      Shape shape;
      for (const auto& s : a.at("shape")) shape.push_back(s.get<int64_t>());
      const char* p = base + a.at("offset").get<size_t>();
      return Array(static_cast<DType>(a.at("dtype").get<int>()), shape,
                   std::shared_ptr<const void>(w.token, p), p);
    };
    FleetData f;
    const Json& arrays = j.at("arrays");
    f.train.x = array(arrays[0]);
    f.train.y = array(arrays[1]);
    if (!arrays[2].is_null()) f.test = XY{array(arrays[2]), array(arrays[3])};
    f.scale = j.at("scale").get<float>();
    f.n_train = j.at("n_train").get<int64_t>();
    f.n_val = j.at("n_val").get<int64_t>();
    f.input_shape = f.train.x.sample_shape();
    f.train_labels = labels_from_json(j.at("train_labels"));
    f.test_labels = labels_from_json(j.at("test_labels"));
    f.train_name = j.at("train_name").get<std::string>();
    f.test_name = j.at("test_name").get<std::string>();
    windows_.push_back(std::move(w));
    return f;
  }

  std::vector<int> share_cpus(const std::vector<int>& allowed) override {
    // Every rank of the node learns every rank's CPUs, then all compute the same split: each CPU
    // goes to the rank allowed on it with the fewest CPUs so far (the lowest rank on ties).
    const int n = static_cast<int>(allowed.size());
    std::vector<int> counts(static_cast<size_t>(node_size_));
    MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, node_);
    std::vector<int> displs(static_cast<size_t>(node_size_), 0);
    for (size_t i = 1; i < displs.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
    std::vector<int> all(static_cast<size_t>(displs.back() + counts.back()));
    MPI_Allgatherv(allowed.data(), n, MPI_INT, all.data(), counts.data(), displs.data(), MPI_INT,
                   node_);
    std::vector<std::vector<int>> sets(static_cast<size_t>(node_size_));
    std::vector<int> cpus;
    for (int r = 0; r < node_size_; ++r) {
      const size_t ru = static_cast<size_t>(r);
      sets[ru].assign(all.begin() + displs[ru], all.begin() + displs[ru] + counts[ru]);
      cpus.insert(cpus.end(), sets[ru].begin(), sets[ru].end());
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    std::vector<std::vector<int>> given(static_cast<size_t>(node_size_));
    for (int c : cpus) {
      int best = -1;
      for (int r = 0; r < node_size_; ++r) {
        const auto& s = sets[static_cast<size_t>(r)];
        if (!std::binary_search(s.begin(), s.end(), c)) continue;
        if (best < 0 ||
            given[static_cast<size_t>(r)].size() < given[static_cast<size_t>(best)].size())
          best = r;
      }
      given[static_cast<size_t>(best)].push_back(c);
    }
    std::vector<int> mine = given[static_cast<size_t>(node_rank_)];
    // More ranks than CPUs: this rank shares one of its CPUs.
    if (mine.empty() && !allowed.empty())
      mine.push_back(allowed[static_cast<size_t>(node_rank_) % allowed.size()]);
    return mine;
  }

  std::vector<std::string> gather(const std::string& mine) override {
    const int n = int_count(mine.size());
    std::vector<int> counts(rank_ == 0 ? static_cast<size_t>(size_) : 0);
    MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm_);
    std::vector<int> displs(counts.size(), 0);
    for (size_t i = 1; i < displs.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
    std::string all(rank_ == 0 ? static_cast<size_t>(displs.back() + counts.back()) : 0, '\0');
    MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(), MPI_CHAR, 0,
                comm_);
    std::vector<std::string> out;
    for (size_t i = 0; i < counts.size(); ++i)
      out.push_back(all.substr(static_cast<size_t>(displs[i]), static_cast<size_t>(counts[i])));
    return out;
  }

  void send(int to, Tag tag, std::string bytes) override {
    if (bytes.size() <= kMaxPiece) {
      post(to, static_cast<int>(tag), std::move(bytes));
      return;
    }
    // Too big for one MPI message: announce, then send the pieces (in order: same source, tag).
    const Json big = {{"tag", static_cast<int>(tag)}, {"bytes", bytes.size()}};
    post(to, kBigTag, big.dump());
    for (size_t at = 0; at < bytes.size(); at += kMaxPiece)
      post(to, kPieceTag, bytes.substr(at, kMaxPiece));
  }

  bool receive(int& from, Tag& tag, std::string& bytes) override {
    int flag = 0;
    MPI_Status st;
    // Open MPI's MPI_Iprobe looks at the messages already queued before it advances the
    // transports, so a message that arrived since the last call shows up only on the second.
    for (int attempt = 0; attempt < 2 && !flag; ++attempt)
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &st);
    if (!flag) return false;
    from = st.MPI_SOURCE;
    bytes = recv(from, st.MPI_TAG, st);
    int t = st.MPI_TAG;
    if (t == kBigTag) {
      const Json big = Json::parse(bytes);
      t = big.at("tag").get<int>();
      const size_t total = big.at("bytes").get<size_t>();
      bytes.clear();
      bytes.reserve(total);
      while (bytes.size() < total) {
        MPI_Probe(from, kPieceTag, comm_, &st);
        bytes += recv(from, kPieceTag, st);
      }
    }
    tag = static_cast<Tag>(t);
    return true;
  }

  bool sending() override {
    for (auto it = out_.begin(); it != out_.end();) {
      int done = 0;
      MPI_Test(&it->req, &done, MPI_STATUS_IGNORE);
      it = done ? out_.erase(it) : std::next(it);
    }
    return !out_.empty();
  }

 private:
  struct Outgoing {
    std::string bytes;
    MPI_Request req = MPI_REQUEST_NULL;
  };
  struct Window {
    MPI_Win win = MPI_WIN_NULL;
    std::shared_ptr<int> token;  // every Array into the window holds a copy
  };

  void post(int to, int tag, std::string bytes) {
    // The list keeps each buffer at a fixed address until its send completes.
    out_.push_back(Outgoing{std::move(bytes), MPI_REQUEST_NULL});
    Outgoing& o = out_.back();
    MPI_Isend(o.bytes.data(), int_count(o.bytes.size()), MPI_BYTE, to, tag, comm_, &o.req);
  }

  std::string recv(int from, int tag, MPI_Status& st) {
    int n = 0;
    MPI_Get_count(&st, MPI_BYTE, &n);
    std::string b(static_cast<size_t>(n), '\0');
    MPI_Recv(b.data(), n, MPI_BYTE, from, tag, comm_, MPI_STATUS_IGNORE);
    return b;
  }

  void broadcast_node(std::string& s) {
    uint64_t n = s.size();
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, node_);
    s.resize(n);
    MPI_Bcast(s.data(), int_count(n), MPI_CHAR, 0, node_);
  }

  MPI_Comm comm_ = MPI_COMM_NULL, node_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, node_rank_ = 0, node_size_ = 1;
  std::string host_;
  std::list<Outgoing> out_;
  std::vector<Window> windows_;
};

}  // namespace

std::unique_ptr<Cluster> start_mpi_cluster() {
  if (!launched_by_mpi()) return nullptr;
  return std::make_unique<MpiCluster>();
}

bool built_with_mpi() { return true; }

}  // namespace nnfleet
