// File helpers: whole-file reads and atomic writes (temporary name in the same folder, fsync,
// rename), so nothing half-written is ever read back.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace nnfleet {

// Opens `path` for reading only when it is a regular file, without ever blocking: a FIFO would
// block open() until a writer came (and SIGTERM could not stop the wait), and a device or socket
// never ends. Returns a descriptor (O_CLOEXEC, blocking reads) and sets `size`; on failure
// returns -1 with `why` set to the reason, worded to follow "failed to read '<path>': ".
int open_regular_file(const std::string& path, std::string& why, uint64_t* size = nullptr);
// Reads a whole regular file into `out`; false with `why` set as above.
bool read_regular_file(const std::string& path, std::string& out, std::string& why);
// Reads a whole file; throws FileError naming the path and the reason.
std::string read_file(const std::string& path);
// How far an atomic write is pushed before it counts as done.
enum class Durability {
  kProcessCrash,  // rename only: survives the process dying (kill -9) at any moment; for
                  // checkpoints, rewritten every epoch, where an fsync each time costs more
                  // than the training of a small model
  kSystemCrash,   // fsync the file and its folder as well: survives power loss
};
// Writes `content` to `path` atomically. Throws FileError.
void write_file_atomic(const std::string& path, std::string_view content,
                       Durability d = Durability::kSystemCrash);
// The same for content in pieces, written one after the other (no joined copy in memory).
void write_file_atomic(const std::string& path, std::span<const std::string_view> pieces,
                       Durability d = Durability::kSystemCrash);
// Lets `writer` fill a temporary file (its path is the argument), then renames it over `path`.
// The temporary is removed if `writer` throws. Throws FileError.
void write_atomic_with(const std::string& path, const std::function<void(const std::string&)>& writer,
                       Durability d = Durability::kSystemCrash);
bool file_exists(const std::string& path);
// Creates a directory and its parents; throws FileError.
void make_dirs(const std::string& path);

}  // namespace nnfleet
