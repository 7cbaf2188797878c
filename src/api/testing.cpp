// Test hooks of the public API (nnfleet/testing.h), over the engine's own (fleet/run_folder.h).
#include "nnfleet/testing.h"

#include <barrier>
#include <memory>

#include "fleet/run_folder.h"

namespace nnfleet::api::testing {
namespace {
std::unique_ptr<std::barrier<>> g_barrier;
}  // namespace

void set_run_folder_barrier(int parties) {
  fleet_detail::g_folder_hook = nullptr;
  g_barrier.reset();
  if (parties <= 0) return;
  g_barrier = std::make_unique<std::barrier<>>(parties);
  fleet_detail::g_folder_hook = [](bool ready) {
    if (ready)
      g_barrier->arrive_and_wait();
    else
      g_barrier->arrive_and_drop();
  };
}

}  // namespace nnfleet::api::testing
