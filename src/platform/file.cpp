// File: an owned descriptor with whole reads and writes.
#include "platform/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace nnfleet {

File File::open_regular(const std::string& path, std::string& why) {
  File f(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!f.is_open()) {
    why = std::strerror(errno);
    return f;
  }
  struct stat st {};
  if (::fstat(f.fd_, &st) != 0) {
    why = std::strerror(errno);
  } else if (S_ISDIR(st.st_mode)) {
    why = "is a directory; expected a regular file";
  } else if (!S_ISREG(st.st_mode)) {
    why = std::string("is a ") +
          (S_ISFIFO(st.st_mode)   ? "FIFO (named pipe)"
           : S_ISSOCK(st.st_mode) ? "socket"
                                  : "device") +
          "; expected a regular file";
  } else if (::fcntl(f.fd_, F_SETFL, ::fcntl(f.fd_, F_GETFL) & ~O_NONBLOCK) != 0) {
    why = std::strerror(errno);
  } else {
    f.size_ = static_cast<uint64_t>(st.st_size);
    return f;
  }
  f.close();
  return f;
}

File File::create(const std::string& path, unsigned mode) {
  return File(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
}

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

File::File(File&& o) noexcept : fd_(std::exchange(o.fd_, -1)), size_(o.size_) {}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    size_ = o.size_;
  }
  return *this;
}

namespace {

// Calls `one(at, n)` (a read(2) or pread(2) of n bytes into dst + at) until `n` bytes or the end.
template <typename Read>
bool read_loop(size_t n, size_t& got, const Read& one) {
  got = 0;
  while (got < n) {
    const ssize_t r = one(got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

bool File::read_full(void* dst, size_t n, size_t& got) {
  char* p = static_cast<char*>(dst);
  return read_loop(n, got, [&](size_t at, size_t len) { return ::read(fd_, p + at, len); });
}

bool File::pread_full(void* dst, size_t n, uint64_t offset, size_t& got) {
  char* p = static_cast<char*>(dst);
  return read_loop(n, got, [&](size_t at, size_t len) {
    return ::pread(fd_, p + at, len, static_cast<off_t>(offset + at));
  });
}

bool write_fully(int fd, const void* src, size_t n) {
  const char* p = static_cast<const char*>(src);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool File::write_full(const void* src, size_t n) { return write_fully(fd_, src, n); }

bool File::sync() { return ::fsync(fd_) == 0; }

bool File::close() {
  if (fd_ < 0) return true;
  return ::close(std::exchange(fd_, -1)) == 0;
}

int File::release() { return std::exchange(fd_, -1); }

}  // namespace nnfleet
