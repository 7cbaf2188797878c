// A cluster run (cluster_fleet.h): every rank loads the data and reports itself to rank 0; rank 0
// runs the fleet with the other ranks as its Peers (fleet/peers.h), the others run worker ranks.
#include "fleet/cluster/cluster_fleet.h"

#include <string>
#include <utility>
#include <vector>

#include "fleet/cluster/coordinator.h"
#include "fleet/cluster/protocol.h"
#include "fleet/cluster/worker_rank.h"
#include "fleet/peers.h"
#include "platform/cpu.h"

namespace nnfleet {
namespace fleet_detail {
namespace {

// Rank 0: every rank must run the same plan on the same data.
void check_ranks_agree(const std::vector<RankInfo>& ranks) {
  const RankInfo& me = ranks[0];
  for (const RankInfo& r : ranks) {
    const std::string who = "rank " + std::to_string(r.rank) + " (" + r.host + ")";
    if (r.plan_hash != me.plan_hash)
      throw PlanError("failed to start the cluster run: " + who +
                      " loaded a different plan; "
                      "expected the same plan file on every node");
    if (r.data_hash != 0 && me.data_hash != 0 && r.data_hash != me.data_hash)
      throw DataError("failed to start the cluster run: the data " + who +
                      " loaded differs from "
                      "rank 0's; expected the same data files on every node");
  }
}

// Rank 0's view of the other ranks.
class ClusterPeers final : public Peers {
 public:
  ClusterPeers(Cluster& cluster, std::vector<RankInfo> ranks)
      : cluster_(cluster), ranks_(std::move(ranks)) {}

  void agree(const std::function<void()>& step) override {
    cluster_.agree([&] {
      check_ranks_agree(ranks_);
      step();
    });
  }
  void add_slots(Slots& slots) const override {
    slots.hosts.at(0) = ranks_[0].host;
    for (size_t r = 1; r < ranks_.size(); ++r) {
      slots.hosts.push_back(ranks_[r].host);
      slots.base.push_back(static_cast<int>(slots.cores.size()));
      slots.cores.insert(slots.cores.end(), ranks_[r].cores.begin(), ranks_[r].cores.end());
      slots.ranks.insert(slots.ranks.end(), ranks_[r].cores.size(), static_cast<int>(r));
    }
  }
  void describe(std::string& where, Json& start) const override {
    where += " on " + std::to_string(ranks_.size()) + " MPI ranks";
    start["ranks"] = ranks_.size();
  }
  void show(Display& live, const Slots& slots) const override {
    live.set_ranks(slots.ranks);
    for (const RankInfo& r : ranks_) {
      std::string list;
      for (int c : r.cores) {
        if (!list.empty()) list += ',';
        list += std::to_string(c);
      }
      live.note("rank " + std::to_string(r.rank) + " on " + r.host + ": " +
                    std::to_string(r.cores.size()) + " worker(s) on cores " + list +
                    (r.loaded_data ? "; read the data" : "; shares its node's copy of the data"),
                {{"event", "rank"},
                 {"rank", r.rank},
                 {"host", r.host},
                 {"cores", r.cores},
                 {"loaded_data", r.loaded_data}});
    }
  }
  bool helpers() const override { return false; }
  bool send_checkpoints() const override { return true; }
  void serve(RunState& st, const Slots& slots, std::atomic<int>& running,
             FleetSummary& sum) override {
    coordinate(cluster_, st, ranks_, slots.base, running, sum);
  }
  double account(FleetSummary& sum, int local_jobs, double local_busy) override {
    RankSummary& me = sum.ranks[0];
    me.jobs = local_jobs;
    me.busy_seconds = local_busy;
    measure_memory(me);
    double busy = local_busy;
    for (size_t r = 1; r < sum.ranks.size(); ++r) busy += sum.ranks[r].busy_seconds;
    return busy;
  }
  void finish(const std::vector<ModelResult>& results, bool interrupted, int code) override {
    finish_cluster(cluster_, results, interrupted, code);
  }

 private:
  Cluster& cluster_;
  const std::vector<RankInfo> ranks_;
};

}  // namespace
}  // namespace fleet_detail

FleetSummary run_cluster_fleet(const Plan& plan, const FleetOptions& opts, const ModelIo& io,
                               Cluster* cluster) {
  using namespace fleet_detail;
  if (!cluster || cluster->size() <= 1) return run_fleet(plan, opts, io);
  // 1. Data, loaded once per node (every source on every node, in Plan::sources order, since
  // each load is collective) and shared read-only by every worker of the node.
  bool loaded_data = true;
  std::vector<FleetData> data;
  for (const DataSpec& spec : plan.sources)
    data.push_back(cluster->load_shared_data(spec, opts.arrays, loaded_data));
  std::vector<int> cores = allowed_cpus();
  if (opts.workers == 0) cores = cluster->share_cpus(cores);
  const std::vector<int> mine = worker_cores(cores, opts.workers);

  // Every rank reports itself to rank 0; ranks other than 0 then wait for rank 0 to validate the
  // plan and open the output folder, and run their workers.
  RankInfo me;
  me.rank = cluster->rank();
  me.host = cluster->host();
  me.cores = mine;
  me.loaded_data = loaded_data;
  me.plan_hash = plan_hash(plan);
  me.data_hash = loaded_data ? data_hash(data) : 0;
  std::vector<RankInfo> ranks;
  for (const auto& s : cluster->gather(me.to_json().dump()))
    ranks.push_back(RankInfo::from_json(Json::parse(s)));
  if (cluster->rank() != 0) {
    cluster->agree([] {});
    return run_worker_rank(*cluster, plan, opts, io, data, mine);
  }
  ClusterPeers peers(*cluster, std::move(ranks));
  return run_fleet_here(plan, opts, io, data, mine, peers);
}

}  // namespace nnfleet
