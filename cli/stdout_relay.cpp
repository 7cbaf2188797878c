// StdoutRelay: a pipe, a thread that drains it into memory, and a thread that writes memory out.
#include "stdout_relay.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "nnfleet/error.h"

namespace nnfleet::cli {

struct StdoutRelay::State {
  std::mutex mu;
  std::condition_variable cv;
  std::string queued;
  bool eof = false;        // the pipe is closed and drained
  bool delivered = false;  // the writer wrote everything (or its reader is gone)
  int out_fd = -1;         // the real standard output (a duplicate the writer owns)
};

void StdoutRelay::drain(std::shared_ptr<State> s, int pipe_fd) {
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(pipe_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    std::lock_guard<std::mutex> lock(s->mu);
    if (n <= 0) {
      s->eof = true;
      s->cv.notify_all();
      break;
    }
    s->queued.append(buf, static_cast<size_t>(n));
    s->cv.notify_all();
  }
  ::close(pipe_fd);
}

void StdoutRelay::deliver(std::shared_ptr<State> s) {
  bool failed = false;
  for (;;) {
    std::string chunk;
    {
      std::unique_lock<std::mutex> lock(s->mu);
      s->cv.wait(lock, [&] { return !s->queued.empty() || s->eof; });
      if (s->queued.empty()) break;
      chunk.swap(s->queued);
    }
    for (size_t at = 0; at < chunk.size() && !failed;) {
      const ssize_t n = ::write(s->out_fd, chunk.data() + at, chunk.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        failed = true;  // the reader is gone: drop the rest
      else
        at += static_cast<size_t>(n);
    }
  }
  ::close(s->out_fd);
  std::lock_guard<std::mutex> lock(s->mu);
  s->delivered = true;
  s->cv.notify_all();
}

StdoutRelay::StdoutRelay() : state_(std::make_shared<State>()) {
  int p[2];
  std::fflush(stdout);
  if (::pipe2(p, O_CLOEXEC) != 0)
    throw Error(std::string("failed to relay standard output: ") + std::strerror(errno));
  saved_fd_ = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  state_->out_fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (saved_fd_ < 0 || state_->out_fd < 0 || ::dup2(p[1], STDOUT_FILENO) < 0)
    throw Error(std::string("failed to relay standard output: ") + std::strerror(errno));
  ::close(p[1]);
  std::thread(drain, state_, p[0]).detach();
  std::thread(deliver, state_).detach();
}

StdoutRelay::~StdoutRelay() {
  std::fflush(stdout);
  // Putting the real stdout back closes the pipe's last write end: the drain thread sees EOF.
  ::dup2(saved_fd_, STDOUT_FILENO);
  ::close(saved_fd_);
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait_for(lock, std::chrono::seconds(1), [&] { return state_->delivered; });
}

}  // namespace nnfleet::cli
