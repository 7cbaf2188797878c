// What a public Cluster (nnfleet/cluster.h) holds: the engine's ranks (fleet/cluster/).
#pragma once

#include <memory>

#include "fleet/cluster/cluster.h"
#include "nnfleet/cluster.h"

namespace nnfleet::api {

struct Cluster::Impl {
  std::unique_ptr<nnfleet::Cluster> ranks;
};

// The library's way in to a Cluster's ranks (a friend of Cluster).
struct ClusterAccess {
  static nnfleet::Cluster* ranks(const Cluster* c) { return c ? c->impl_->ranks.get() : nullptr; }
};

}  // namespace nnfleet::api
