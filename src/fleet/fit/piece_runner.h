// PieceRunner: where the fit loop hands the pieces of a split batch (Network::pieces) to be
// computed. A types header in fit/ rather than the fleet's HelpBoard (fleet/help_board.h), which
// implements it: which idle workers of a run help, and when they stop waiting, is scheduling, the
// fleet's job; the fit loop only needs every piece computed before run() returns.
#pragma once

#include <functional>

namespace nnfleet {

class PieceRunner {
 public:
  // Runs fn(0), ..., fn(pieces - 1), on the calling thread and possibly others; returns when all
  // have finished. `owner` (the job's plan index) names the job to whoever helps.
  virtual void run(int pieces, const std::function<void(int)>& fn, int owner = -1) = 0;

 protected:
  ~PieceRunner() = default;  // not owned through this interface
};

}  // namespace nnfleet
