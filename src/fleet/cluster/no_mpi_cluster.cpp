// The Cluster factory of a build without MPI (NNFLEET_MPI off): nnfleet always runs as one node.
#include "fleet/cluster/cluster.h"

namespace nnfleet {

std::unique_ptr<Cluster> start_mpi_cluster() { return nullptr; }

bool built_with_mpi() { return false; }

}  // namespace nnfleet
