// Whole-file reads, atomic writes, appends, hashes, locks, free space, and the write budget of
// fault injection.
#include "platform/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "core/check.h"
#include "platform/file.h"
#include "platform/huge_buffer.h"

namespace nnfleet {
namespace {

std::string temp_name(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

// The folder a file `path` is in ("." for a bare name).
std::string folder_of(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

[[noreturn]] void fail_write(const std::string& path, int err) {
  throw FileError("failed to write file '" + path + "': " + std::strerror(err));
}

// --- fault injection: bytes that may still be written (-1: no limit) ---------------------------

std::atomic<int64_t> g_budget{-1}, g_free{-1};
std::atomic<bool> g_unnamed{true};  // set_unnamed_files()
std::once_flag g_budget_from_env;

void read_budget_from_env() {
  std::call_once(g_budget_from_env, [] {
    const char* v = std::getenv("NNFLEET_FAULT_WRITE_BUDGET");
    if (v && *v) g_budget = std::strtoll(v, nullptr, 10);
    const char* f = std::getenv("NNFLEET_FAULT_FREE_SPACE");
    if (f && *f) g_free = std::strtoll(f, nullptr, 10);
  });
}

// Takes n bytes from the budget; false (and the budget spent: a full disk stays full) when fewer
// are left.
bool take_budget(uint64_t n) {
  read_budget_from_env();
  int64_t b = g_budget.load();
  for (;;) {
    if (b < 0) return true;
    const bool fits = static_cast<uint64_t>(b) >= n;
    const int64_t left = fits ? b - static_cast<int64_t>(n) : 0;
    if (g_budget.compare_exchange_weak(b, left)) return fits;
  }
}

}  // namespace

int open_regular_file(const std::string& path, std::string& why, uint64_t* size) {
  File f = File::open_regular(path, why);
  if (f.is_open() && size) *size = f.size();
  return f.release();
}

bool read_regular_file(const std::string& path, std::string& out, std::string& why) {
  File f = File::open_regular(path, why);
  if (!f.is_open()) return false;
  out.assign(static_cast<size_t>(f.size()), '\0');
  size_t got = 0;
  if (!f.read_full(out.data(), out.size(), got)) {
    why = std::string("read failed: ") + std::strerror(errno);
    return false;
  }
  out.resize(got);  // the file shrank while we read it
  return true;
}

bool read_regular_file(const std::string& path, FileBytes& out, std::string& why) {
  File f = File::open_regular(path, why);
  if (!f.is_open()) return false;
  const size_t n = static_cast<size_t>(f.size());
  if (n >= kHugeBufferMinBytes)
    out.data = {static_cast<char*>(huge_alloc(n)), FileBytesFree{n}};
  else
    out.data = {new char[n ? n : 1], FileBytesFree{}};
  if (!f.read_full(out.data.get(), n, out.size)) {
    why = std::string("read failed: ") + std::strerror(errno);
    return false;
  }
  return true;  // out.size < n: the file shrank while we read it
}

void FileBytesFree::operator()(char* p) const {
  if (mapped)
    huge_free(p, mapped);
  else
    delete[] p;
}

void set_write_budget(int64_t bytes) {
  read_budget_from_env();  // so that a later first write does not overwrite this
  g_budget = bytes < 0 ? -1 : bytes;
}

void set_unnamed_files(bool on) { g_unnamed = on; }

void set_free_space(int64_t bytes) {
  read_budget_from_env();
  g_free = bytes < 0 ? -1 : bytes;
}

std::string read_file(const std::string& path) {
  std::string out, why;
  if (!read_regular_file(path, out, why))
    throw FileError("failed to read file '" + path + "': " + why);
  return out;
}

void write_atomic_with(const std::string& path,
                       const std::function<void(const std::string&)>& writer, Durability d) {
  const std::string tmp = temp_name(path);
  try {
    writer(tmp);
    // Whatever wrote the temporary (this module, HDF5, libzip) counts against the budget.
    struct stat st {};
    if (::stat(tmp.c_str(), &st) == 0 && !take_budget(static_cast<uint64_t>(st.st_size)))
      fail_write(path, ENOSPC);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (d == Durability::kSystemCrash) fsync_path(tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    throw FileError("failed to write file '" + path + "': rename failed: " + std::strerror(e));
  }
  if (d == Durability::kSystemCrash) fsync_path(folder_of(path));
}

void write_file_atomic(const std::string& path, std::string_view content, Durability d) {
  write_file_atomic(path, std::span<const std::string_view>(&content, 1), d);
}

namespace {

// An unnamed file in the folder of `path` (O_TMPFILE), or -1 with errno set.
int open_unnamed_beside(const std::string& path) {
  return ::open(folder_of(path).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
}

bool no_tmpfile(int err) { return err == EOPNOTSUPP || err == EISDIR || err == EINVAL; }

// Names the unnamed file `fd` `path`: one directory operation (linkat) where nothing has that name
// yet, which is what a run's models/ folder sees once per model (8,000 files of 1.9 KB from 2
// threads into one new folder on ext4, Zen 3, six runs each: 0.36-4.4 s through a temporary and
// rename, growing as the file system filled, against 0.17-0.27 s linked); where something has,
// linked under the temporary name and renamed over it. 0, or an errno.
int name_unnamed(int fd, const std::string& path) {
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) == 0) return 0;
  if (errno != EEXIST) return errno;
  const std::string tmp = temp_name(path);
  ::unlink(tmp.c_str());  // a stale one (a crash of an earlier process of this id) as O_TRUNC would
  if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0) return errno;
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return e;
  }
  return 0;
}

// `pieces` written to `fd`, which is closed on failure (FileError for `path`). Returns the bytes.
uint64_t write_pieces(int fd, const std::string& path, std::span<const std::string_view> pieces) {
  uint64_t bytes = 0;
  for (std::string_view piece : pieces) {
    bytes += piece.size();
    if (!write_fully(fd, piece.data(), piece.size())) {
      const int e = errno;
      ::close(fd);
      fail_write(path, e);
    }
  }
  return bytes;
}

}  // namespace

// The file is written unnamed and gets its name when complete, so a crash at any moment leaves no
// half-written file, and no temporary either where the name is new (a replaced file passes
// through a temporary name for the moment of its rename); where the filesystem has no O_TMPFILE,
// or /proc is not mounted, through a named temporary and rename(2) (write_atomic_with).
void write_file_atomic(const std::string& path, std::span<const std::string_view> pieces,
                       Durability d) {
  static const bool have_proc = ::access("/proc/self/fd", F_OK) == 0;
  const bool unnamed = have_proc && g_unnamed.load();
  const int fd = unnamed ? open_unnamed_beside(path) : -1;
  if (fd >= 0) {
    if (!take_budget(write_pieces(fd, path, pieces))) {  // as write_atomic_with counts it
      ::close(fd);
      fail_write(path, ENOSPC);
    }
    if (d == Durability::kSystemCrash) ::fsync(fd);
    const int e = name_unnamed(fd, path);
    // A late write error (NFS reports them at close) fails the write even though the name is
    // given: the caller records nothing for it, and --resume redoes it.
    if (::close(fd) != 0 && e == 0) fail_write(path, errno);
    if (e != 0)
      throw FileError("failed to write file '" + path + "': link failed: " + std::strerror(e));
    if (d == Durability::kSystemCrash) fsync_path(folder_of(path));
    return;
  }
  if (unnamed && !no_tmpfile(errno)) fail_write(path, errno);
  write_atomic_with(
      path,
      [&](const std::string& tmp) {
        const int tfd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (tfd < 0) fail_write(path, errno);
        write_pieces(tfd, path, pieces);
        if (::close(tfd) != 0) fail_write(path, errno);
      },
      d);
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

void make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw FileError("failed to create directory '" + path + "': " + ec.message());
}

uint64_t hash_file(const std::string& path, uint64_t* size) {
  auto fail = [&](const std::string& why) -> uint64_t {
    throw FileError("failed to hash file '" + path + "': " + why);
  };
  std::string why;
  File f = File::open_regular(path, why);  // never blocks on a FIFO
  if (!f.is_open()) return fail(why);
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> st(XXH3_createState(),
                                                                     XXH3_freeState);
  if (!st) throw std::bad_alloc();
  XXH3_64bits_reset(st.get());
  // Read through one buffer per thread, not mapped: a mapping faults the file's pages in one by
  // one (20 ms of W1's launch for Fashion-MNIST's 31 MB under this workplace's VMs), and they
  // would count in this process's resident memory (an 8 MB model file added 8 MB to W1's peak).
  constexpr size_t kPiece = size_t{256} << 10;
  thread_local const std::unique_ptr<char[]> buf = std::make_unique_for_overwrite<char[]>(kPiece);
  uint64_t total = 0;
  for (size_t got = 0;; total += got) {
    if (!f.read_full(buf.get(), kPiece, got)) return fail(std::strerror(errno));
    if (got == 0) break;
    XXH3_64bits_update(st.get(), buf.get(), got);
  }
  if (size) *size = total;
  return XXH3_64bits_digest(st.get());
}

uint64_t hash_bytes(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

std::string hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

uint64_t free_bytes(const std::string& path) {
  struct statvfs s {};
  if (::statvfs(path.c_str(), &s) != 0)
    throw FileError("failed to check free space in '" + path + "': " + std::strerror(errno));
  read_budget_from_env();
  const int64_t fake = g_free.load();
  return fake >= 0 ? static_cast<uint64_t>(fake) : static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

void sync_folder(const std::string& path) {
  for (const std::string& p : {path, folder_of(path)}) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      const int e = errno;
      if (fd >= 0) ::close(fd);
      throw FileError("failed to sync folder '" + p + "' to disk: " + std::strerror(e));
    }
    ::close(fd);
  }
}

// --- AppendFile --------------------------------------------------------------------------------

AppendFile::AppendFile(const std::string& path, uint64_t keep) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0 ||
      (static_cast<uint64_t>(st.st_size) > keep &&
       ::ftruncate(fd_, static_cast<off_t>(keep)) != 0)) {
    const int e = errno;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    fail_write(path, e);
  }
  size_ = std::min<uint64_t>(keep, static_cast<uint64_t>(st.st_size));
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

AppendFile::AppendFile(AppendFile&& o) noexcept
    : fd_(o.fd_), size_(o.size_), path_(std::move(o.path_)) {
  o.fd_ = -1;
}

AppendFile& AppendFile::operator=(AppendFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    size_ = o.size_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

void AppendFile::append(std::string_view bytes) {
  NNFLEET_CHECK(fd_ >= 0);
  int e = ENOSPC;
  if (take_budget(bytes.size())) {
    if (write_fully(fd_, bytes.data(), bytes.size())) {
      size_ += bytes.size();
      return;
    }
    e = errno;
  }
  // Nothing half-written stays behind (if even this fails, a reader drops the torn record).
  [[maybe_unused]] const int cut = ::ftruncate(fd_, static_cast<off_t>(size_));
  fail_write(path_, e);
}

void AppendFile::sync() {
  NNFLEET_CHECK(fd_ >= 0);
  if (::fsync(fd_) != 0) fail_write(path_, errno);
}

// --- FileLock ----------------------------------------------------------------------------------

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

FileLock::FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

bool FileLock::try_lock(const std::string& path, long* holder) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw FileError("failed to lock '" + path + "': " + std::string(std::strerror(errno)));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    if (e != EWOULDBLOCK)
      throw FileError("failed to lock '" + path + "': " + std::string(std::strerror(e)));
    if (holder) *holder = n > 0 ? std::strtol(buf, nullptr, 10) : 0;
    return false;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  // The holder's id, for the message another process shows (best effort: never fails a run).
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] const ssize_t w = ::pwrite(fd, pid.data(), pid.size(), 0);
  }
  return true;
}

}  // namespace nnfleet
