// StdoutRelay: rank 0's standard output under mpirun. mpirun carries the ranks' output to the
// user, and stops reading it the moment it is told to end the job (Ctrl-C, SIGTERM); it then
// signals the ranks (SIGCONT, a second later SIGTERM, then SIGKILL). A rank blocked writing an
// event line could neither checkpoint nor write its results in that time. The relay sends fd 1
// into a pipe that a thread of its own empties into memory, and another thread writes that to
// the real standard output: printing never blocks the fleet, whatever the reader does.
#pragma once

#include <memory>

namespace nnfleet::cli {

class StdoutRelay {
 public:
  // Redirects fd 1 (stdio's stdout keeps working). Throws Error when the pipe cannot be made.
  StdoutRelay();
  // Flushes stdout, gives the writer up to a second to deliver what is queued (a reader that
  // went away loses the rest), and restores fd 1.
  ~StdoutRelay();
  StdoutRelay(const StdoutRelay&) = delete;
  StdoutRelay& operator=(const StdoutRelay&) = delete;

 private:
  struct State;
  static void drain(std::shared_ptr<State> s, int pipe_fd);
  static void deliver(std::shared_ptr<State> s);
  std::shared_ptr<State> state_;  // shared with the threads, which may outlive the relay
  int saved_fd_ = -1;
};

}  // namespace nnfleet::cli
