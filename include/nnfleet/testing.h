// nnfleet's public API: hooks for the tests of front ends (the Python module's own tests use
// them). Never needed to use nnfleet; each is off until set.
#pragma once

namespace nnfleet::api::testing {

// The next `parties` runs of this process that create an output folder wait for each other just
// before the rename that makes their folder the output folder (or drop out when creating it
// failed), so that a test can start two runs into one folder at the same moment without relying
// on timing. 0: off.
void set_run_folder_barrier(int parties);

}  // namespace nnfleet::api::testing
