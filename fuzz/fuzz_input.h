// Helpers for the libFuzzer harnesses (fuzz/README section of README.md): nnfleet's loaders take
// file paths, so each input is written to one file on tmpfs (rewritten in place per input) and
// the loader is called on that path. A harness accepts the errors a user may cause (nnfleet::Error)
// and lets everything else escape: a crash, a sanitizer report, an uncaught exception (a
// Json::exception, std::bad_alloc from an unbounded allocation) or a timeout is a bug.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace nnfleet::fuzz {

class InputFile {
 public:
  // `name` is the file's name ("input.npy"); it lives in a directory of its own for this process.
  explicit InputFile(const std::string& name) {
    const char* base = std::getenv("NNFLEET_FUZZ_TMP");
    std::string dir = base ? base : (::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    dir += "/nnfleet-fuzz-" + std::to_string(::getpid());
    ::mkdir(dir.c_str(), 0700);
    dir_ = dir;
    path_ = dir + "/" + name;
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) std::abort();
  }
  ~InputFile() {
    ::close(fd_);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Replaces the file's contents with data[0, size); returns the path.
  const std::string& write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t w = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (w <= 0) std::abort();
      done += static_cast<size_t>(w);
    }
    return path_;
  }
  const std::string& path() const { return path_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, path_;
  int fd_ = -1;
};

}  // namespace nnfleet::fuzz

// For the harnesses that reach libhdf5 (Keras .h5 and .keras): libhdf5 1.10 itself leaks a few
// small blocks when H5Fopen gives up on some corrupt files, and a corrupt size can make it ask
// malloc for terabytes, which it handles when malloc returns null (AddressSanitizer returns null
// only with allocator_may_return_null). The same settings as tests/io/keras_corrupt_test.cpp.
#define NNFLEET_FUZZ_HDF5_SETTINGS                                                            \
  extern "C" const char* __lsan_default_suppressions() { return "leak:libhdf5_serial.so\n"; } \
  extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
