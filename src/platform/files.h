// File helpers: whole-file reads and atomic writes (temporary name in the same folder, then
// rename), so nothing half-written is ever read back; append-only files, file hashes, advisory
// locks and free space for the output folder of a run; and fault injection for tests.
//
// Fault injection (leveldb's fault_injection_test in spirit): set_write_budget(n), or the
// environment variable NNFLEET_FAULT_WRITE_BUDGET=n read at the first use, lets n more bytes be
// written through this module (atomic writes, appends, and files other code writes under a
// write_atomic_with temporary) and then fails every write as a full disk does (ENOSPC), until
// the budget is set again. set_free_space(n) (NNFLEET_FAULT_FREE_SPACE=n) makes free_bytes()
// report n.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace nnfleet {

// File::open_regular (platform/file.h) for code that keeps a bare descriptor: returns it
// (O_CLOEXEC, blocking reads) and sets `size`; on failure returns -1 with `why` set.
int open_regular_file(const std::string& path, std::string& why, uint64_t* size = nullptr);
// Reads a whole regular file into `out`; false with `why` set as above.
bool read_regular_file(const std::string& path, std::string& out, std::string& why);
// A whole file's bytes in a buffer that is not zero-filled first: std::string's fill of the 26 MB
// of Fashion-MNIST's training images cost 60 ms of W1's launch (Zen 5), for bytes then overwritten.
// A large file's buffer is a huge_alloc one (platform/huge_buffer.h): its 4 KiB page faults cost
// another 70-90 ms.
struct FileBytesFree {
  size_t mapped = 0;  // huge_alloc's size; 0: from new[]
  void operator()(char* p) const;
};
struct FileBytes {
  std::unique_ptr<char, FileBytesFree> data;
  size_t size = 0;
  std::string_view view() const { return {data.get(), size}; }
};
bool read_regular_file(const std::string& path, FileBytes& out, std::string& why);
// Reads a whole file; throws FileError naming the path and the reason.
std::string read_file(const std::string& path);
// How far an atomic write is pushed before it counts as done.
enum class Durability {
  kProcessCrash,  // link or rename only: survives the process dying (kill -9) at any moment;
                  // for files written per model or per epoch, where an fsync each time costs more
                  // than the training of a small model (a run fsyncs its record of them,
                  // jobs.log, once)
  kSystemCrash,   // fsync the file and its folder as well: survives power loss
};
// Writes `content` to `path` atomically. Throws FileError naming the path and the OS reason
// ("No space left on device").
void write_file_atomic(const std::string& path, std::string_view content,
                       Durability d = Durability::kSystemCrash);
// The same for content in pieces, written one after the other (no joined copy in memory).
void write_file_atomic(const std::string& path, std::span<const std::string_view> pieces,
                       Durability d = Durability::kSystemCrash);
// Lets `writer` fill a temporary file (its path is the argument), then renames it over `path`.
// The temporary is removed if `writer` throws. Throws FileError.
void write_atomic_with(const std::string& path,
                       const std::function<void(const std::string&)>& writer,
                       Durability d = Durability::kSystemCrash);
bool file_exists(const std::string& path);
// Creates a directory and its parents; throws FileError.
void make_dirs(const std::string& path);

// XXH3 (64-bit) of a file's bytes, read in pieces (never mapped: its pages do not count in this
// process's resident memory); `size` gets the bytes read. Throws FileError.
uint64_t hash_file(const std::string& path, uint64_t* size = nullptr);
// XXH3 (64-bit) of bytes in memory.
uint64_t hash_bytes(std::string_view bytes);
// A hash as 16 lowercase hex digits.
std::string hex64(uint64_t v);

// Bytes an unprivileged process may still write to the file system holding `path` (statvfs),
// or what set_free_space() said. Throws FileError.
uint64_t free_bytes(const std::string& path);
// fsync(2) of the folder `path` (its entries, not its files' contents) and of the folder holding
// it, so that the names made in them survive a power loss. Throws FileError.
void sync_folder(const std::string& path);

// A file only ever appended to, each append one write(2) of the whole record, so that a crash
// leaves at most its last record torn. Move-only; not thread-safe.
class AppendFile {
 public:
  AppendFile() = default;
  // Opens (creating) `path` for appending after its first `keep` bytes: anything beyond them
  // (a torn record) is cut off. Throws FileError.
  AppendFile(const std::string& path, uint64_t keep);
  ~AppendFile();
  AppendFile(AppendFile&& o) noexcept;
  AppendFile& operator=(AppendFile&& o) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  bool is_open() const { return fd_ >= 0; }
  // Appends `bytes`; on failure the file is cut back to where it was, and FileError thrown.
  void append(std::string_view bytes);
  // fsync(2). Throws FileError.
  void sync();

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// An exclusive advisory lock (flock(2)) on a file, held while the object lives (and by no other
// process: the descriptor is not inherited by children). Move-only.
class FileLock {
 public:
  FileLock() = default;
  ~FileLock();
  FileLock(FileLock&& o) noexcept;
  FileLock& operator=(FileLock&& o) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  // Takes the lock on `path` (created when missing) without waiting and writes this process's
  // id into the file. Returns false when another process holds it; `holder` then gets the id
  // that process wrote (0 when unknown). Throws FileError when the file cannot be opened.
  bool try_lock(const std::string& path, long* holder = nullptr);
  bool locked() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Fault injection (see the top of this file): n >= 0 bytes may still be written; -1: no limit.
void set_write_budget(int64_t bytes);
// Fault injection: free_bytes() reports n >= 0; -1: the file system's own answer.
void set_free_space(int64_t bytes);
// Test seam: false sends write_file_atomic() through a named temporary and rename(2), the route
// of file systems without O_TMPFILE; true (the default): unnamed files where the system has them.
void set_unnamed_files(bool on);

}  // namespace nnfleet
