// nnfleet's public API: one run across the MPI ranks that mpirun or srun started.
//
//   std::unique_ptr<nnfleet::api::Cluster> c = nnfleet::api::Cluster::start_mpi();
//   nnfleet::api::RunOptions o;
//   o.cluster = c.get();  // null: this process alone
//   try { auto r = nnfleet::api::train(plan, {}, o); ... } catch (const nnfleet::PeerExit&) {}
//
// Every rank calls train() with the same plan and options; rank 0 holds the results.
#pragma once

#include <memory>
#include <string>

#include "nnfleet/error.h"

namespace nnfleet {

// Thrown on an MPI rank other than 0 when a collective step failed somewhere. Rank 0 reports the
// problem and exits with its code; this rank leaves quietly, with 0, so that mpirun does not end
// the job before rank 0 has said why.
class PeerExit : public Error {
 public:
  PeerExit() : Error("stopped because another rank failed; rank 0 reports why") {}
};

}  // namespace nnfleet

namespace nnfleet::api {

class Cluster {
 public:
  // The ranks this process was started among by mpirun or srun (MPI is initialized here, once
  // per process, and finalized when the Cluster is destroyed); null when it was not started so,
  // or when nnfleet was built without MPI. Throws Error when MPI cannot start.
  [[nodiscard]] static std::unique_ptr<Cluster> start_mpi();
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  int rank() const;
  int size() const;
  const std::string& host() const;

 private:
  struct Impl;
  friend struct ClusterAccess;  // the library's own door to Impl (src/api/cluster.cpp)
  explicit Cluster(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nnfleet::api
