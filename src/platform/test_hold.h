// Test holds: named points where a test makes a run wait, so that an order of events the test
// needs (a run still training when a second one starts, a checkpoint shipped before a rank dies, an
// idle core helping a split model) happens by construction, never because a core was slow enough.
// Off unless the environment variable NNFLEET_TEST_HOLD is set (or, in a test's own process,
// set_for_tests() is called); then each call costs a lookup, and the points are reached at most
// once per epoch, never per batch.
//
//   NNFLEET_TEST_HOLD="<point>[#<n>][,<point>[#<n>]...]:<folder>"
//
// The n-th time (default: the first) a process reaches a listed point, whichever thread gets there,
// it writes <folder>/<point>.<pid>.held, holding `detail` (a model's name, say), and waits until
// <folder>/<point>.go exists or `stop` is set; so does every later arrival in the process (the
// process is held there: no other worker of it gets past the point meanwhile). A test waits for
// the .held file, does what must happen meanwhile, then creates the .go file (or stops the run).
#pragma once

#include <atomic>
#include <string>
#include <string_view>

namespace nnfleet::test_hold {

// Whether the holds list `point`.
bool listed(std::string_view point);

// Holds the calling thread at `point` as described above; returns at once when the point is not
// listed or this is an arrival before its n-th. Never throws: a folder that cannot be written makes
// the hold a no-op (the test then fails waiting for the .held file, not the run).
void reach(std::string_view point, const std::string& detail,
           const std::atomic<bool>* stop = nullptr);

// For a test's own process: replaces the holds with `spec` (NNFLEET_TEST_HOLD's syntax; "" for
// none) and forgets earlier arrivals. Not thread-safe against runs in progress.
void set_for_tests(const std::string& spec);

}  // namespace nnfleet::test_hold
