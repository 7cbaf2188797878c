// Cluster: the seam between the fleet and MPI. Under mpirun (or srun) nnfleet is a group of
// processes, one per rank; rank 0 coordinates. This header is free of MPI: the fleet's cluster
// protocol (protocol.h) speaks only through this interface, and mpi_cluster.cpp implements it
// with Open MPI when the build has NNFLEET_MPI (no_mpi_cluster.cpp when it has not). Without
// MPI, or when the process was not launched by an MPI launcher, start_mpi_cluster() returns null
// and nnfleet runs as a single node.
//
// Threading: every method must be called from the thread that called start_mpi_cluster() (MPI is
// initialized with MPI_THREAD_FUNNELED); the fleet's worker threads never touch MPI.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "fleet/fleet_data.h"
#include "nnfleet/cluster.h"  // PeerExit

namespace nnfleet {

// Thrown on an MPI rank other than 0 when a collective step failed somewhere. Rank 0 reports the
// problem and exits with its code; this rank leaves quietly, with 0, so that mpirun does not end
// the job before rank 0 has said why.

// Message tags of the fleet protocol (protocol.h); the transport only carries them.
enum class Tag : int {
  kRequest = 1,  // worker -> rank 0: give me a job
  kAssign,       // rank 0 -> worker: a job (and its checkpoint), or none
  kProgress,     // worker -> rank 0: batch progress, for the live display
  kEpoch,        // worker -> rank 0: a finished epoch
  kCheckpoint,   // worker -> rank 0: the checkpoint file after an epoch
  kResult,       // worker -> rank 0: a finished job, its history and model file
  kStopped,      // rank -> rank 0: this rank was told to stop (signal)
  kStop,         // rank 0 -> rank: stop now (finish the batch, checkpoint)
  kBye,          // rank -> rank 0: all workers done; statistics
  kFinal,        // rank 0 -> rank: the run's outcome
};

class Cluster {
 public:
  virtual ~Cluster() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& host() const = 0;

  // Collective. Runs `step` on every rank, then all ranks learn whether it threw (an Error, or any
  // std::exception) anywhere. If so: rank 0 rethrows its own exception, or the error of the lowest
  // failing rank (same Error class, message prefixed with that rank and host); every other rank
  // throws PeerExit (nnfleet/error.h).
  virtual void agree(const std::function<void()>& step) = 0;

  // Collective. The plan's data, read from disk once per node (by the node's first rank) and held
  // in one MPI shared-memory window that every rank of the node reads; `loaded_here` says whether
  // this rank read the files. A source of arrays is read from the node's first rank's `arrays`
  // (FleetOptions::arrays). Errors are agreed as by agree(). The arrays stay valid until the
  // cluster is destroyed; none may outlive it.
  virtual FleetData load_shared_data(const DataSpec& spec, const GivenArrays* arrays,
                                     bool& loaded_here) = 0;

  // Collective over the node. The CPUs this rank's workers use: `allowed` (this rank's affinity),
  // less the CPUs that other ranks of the same node may also use, shared out so that ranks bound
  // to the same CPUs do not oversubscribe them. Never empty.
  virtual std::vector<int> share_cpus(const std::vector<int>& allowed) = 0;

  // Collective. Rank 0 gets every rank's string, in rank order; the others get an empty vector.
  virtual std::vector<std::string> gather(const std::string& mine) = 0;

  // Point to point. send() queues and returns at once (the bytes are kept until delivered);
  // receive() returns false when no message is waiting; sending() advances queued sends and
  // says whether some are still under way. Throws Error on an MPI failure.
  virtual void send(int to, Tag tag, std::string bytes) = 0;
  virtual bool receive(int& from, Tag& tag, std::string& bytes) = 0;
  virtual bool sending() = 0;
};

// The MPI cluster when this build has NNFLEET_MPI and the process was launched by an MPI
// launcher (mpirun, mpiexec, srun: OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_SIZE is set); null
// otherwise. Initializes MPI; the cluster's destructor frees the shared windows and finalizes MPI.
// Throws Error when MPI fails to start.
std::unique_ptr<Cluster> start_mpi_cluster();

// Whether this build can run under MPI (NNFLEET_MPI).
bool built_with_mpi();

}  // namespace nnfleet
