// Cluster (nnfleet/cluster.h): the public handle on the engine's MPI ranks.
#include "nnfleet/cluster.h"

#include "api/cluster_impl.h"

namespace nnfleet::api {

Cluster::Cluster(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Cluster::~Cluster() = default;

std::unique_ptr<Cluster> Cluster::start_mpi() {
  std::unique_ptr<nnfleet::Cluster> ranks = start_mpi_cluster();
  if (!ranks) return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->ranks = std::move(ranks);
  return std::unique_ptr<Cluster>(new Cluster(std::move(impl)));
}

int Cluster::rank() const { return impl_->ranks->rank(); }
int Cluster::size() const { return impl_->ranks->size(); }
const std::string& Cluster::host() const { return impl_->ranks->host(); }

}  // namespace nnfleet::api
