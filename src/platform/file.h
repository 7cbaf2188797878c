// File: one open file descriptor, closed when the object goes. The callers word their own errors
// (a data file, a model, an archive), so failures come back as errno or as a reason text, never as
// an exception. Move-only; not thread-safe per object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nnfleet {

class File {
 public:
  File() = default;
  // Opens `path` for reading only when it is a regular file, without ever blocking: a FIFO would
  // block open() until a writer came (and SIGTERM could not stop the wait), and a device or socket
  // never ends. On failure the File is not open and `why` holds the reason, worded to follow
  // "failed to read '<path>': ".
  static File open_regular(const std::string& path, std::string& why);
  // Creates (or truncates) `path` for writing with permissions `mode`; not open on failure, with
  // errno set.
  static File create(const std::string& path, unsigned mode);
  ~File();
  File(File&& o) noexcept;
  File& operator=(File&& o) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // The size the file had when open_regular() opened it.
  uint64_t size() const { return size_; }
  // Reads until `n` bytes or the end of the file, retrying interrupted reads; `got` gets the bytes
  // read. False on an I/O error, with errno set.
  bool read_full(void* dst, size_t n, size_t& got);
  // The same from byte `offset` on, leaving the file position alone (pread(2)).
  bool pread_full(void* dst, size_t n, uint64_t offset, size_t& got);
  // Writes all `n` bytes, retrying interrupted and short writes. False with errno set.
  bool write_full(const void* src, size_t n);
  // fsync(2); false with errno set.
  bool sync();
  // Closes now; false with errno set when close(2) reports an error (NFS reports late write
  // errors there). Closing a File that is not open does nothing.
  bool close();
  // Gives the descriptor up to a new owner (libzip's zip_fdopen takes it on success).
  int release();

 private:
  explicit File(int fd, uint64_t size = 0) : fd_(fd), size_(size) {}
  int fd_ = -1;
  uint64_t size_ = 0;
};

// write(2) of all `n` bytes to `fd`, retrying interrupted and short writes; false with errno set.
bool write_fully(int fd, const void* src, size_t n);

}  // namespace nnfleet
