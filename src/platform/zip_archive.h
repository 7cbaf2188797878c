// Zip archives through libzip, for .keras files and .npz data: bounded reads of whole members into
// memory, members read as streams, and writing an archive of in-memory members (stored
// uncompressed, as Keras's zipfile does). The whole-member calls throw FileError naming the
// archive and the member; the stream calls report their failures for the caller to word (the
// .npz loader throws DataError).
// Not thread-safe per object; separate objects may be used from separate threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

struct zip;
struct zip_file;

namespace nnfleet {

// What an archive's directory declares of a member, before anything of it is inflated.
struct ZipMemberInfo {
  uint64_t size = 0;             // inflated bytes, as declared
  uint64_t compressed_size = 0;  // bytes in the archive
  bool stored = true;            // not compressed
  bool complete = true;          // the compressed size and method are known as well as the size
};

// One member opened for reading, inflated as it is read. Move-only.
class ZipMemberStream {
 public:
  ZipMemberStream() = default;
  explicit ZipMemberStream(zip_file* f) : f_(f) {}
  ~ZipMemberStream();
  ZipMemberStream(ZipMemberStream&& o) noexcept;
  ZipMemberStream& operator=(ZipMemberStream&& o) noexcept;
  ZipMemberStream(const ZipMemberStream&) = delete;
  ZipMemberStream& operator=(const ZipMemberStream&) = delete;
  bool is_open() const { return f_ != nullptr; }
  // Reads until `n` bytes or the member's end; `got` gets the bytes read. False with libzip's
  // reason in `why` when the data is corrupt (a CRC mismatch shows once the end is read).
  bool read(void* dst, size_t n, size_t& got, std::string& why);

 private:
  zip_file* f_ = nullptr;
};

class ZipReader {
 public:
  // Opens an archive read-only with libzip's consistency checks and at most 100,000 members.
  // Throws FileError.
  explicit ZipReader(const std::string& path);
  // Why an archive could not be opened: the file itself (`why` as File::open_regular words it),
  // or libzip refused its contents (`why` is libzip's reason).
  enum class OpenFault { kFile, kNotZip };
  using OpenFail = std::function<void(OpenFault fault, const std::string& why)>;
  // Opens an archive read-only without libzip's consistency checks and without a bound on the
  // members, calling `fail` (which must throw) where it cannot.
  ZipReader(const std::string& path, const OpenFail& fail);
  ~ZipReader();
  ZipReader(const ZipReader&) = delete;
  ZipReader& operator=(const ZipReader&) = delete;

  const std::vector<std::string>& names() const { return names_; }
  bool has(const std::string& member) const;
  // The member's declared sizes; throws FileError when it is missing or its header unreadable.
  ZipMemberInfo info(const std::string& member) const;
  // The whole member; throws FileError when missing, declared larger than max_bytes, corrupt
  // (CRC), or inflating to more than it declares: inflation stops one byte past the declared
  // size, so at most max_bytes are ever held whatever the member's data says.
  std::string read(const std::string& member, uint64_t max_bytes) const;

  // For callers that word their own errors: the index of `member`, or -1; its sizes (false when
  // libzip cannot read its header or does not know its size); the member as a stream (not open
  // on failure); and libzip's reason for the archive's last failure.
  int64_t index_of(const std::string& member) const;
  bool stat(uint64_t index, ZipMemberInfo& out) const;
  ZipMemberStream open_member(uint64_t index) const;
  std::string last_error() const;

 private:
  ZipReader(const std::string& path, bool check_consistency, int64_t max_members,
            const OpenFail& fail);

  std::string path_;
  zip* z_ = nullptr;
  std::vector<std::string> names_;
};

// One member of an archive to write: its bytes, or (when `file` is set) the contents of that file,
// streamed in when the archive is written rather than held in memory.
struct ZipMember {
  std::string name;
  std::string bytes;
  std::string file;
  bool deflate = false;  // compressed (tests and fuzzers make such archives; nnfleet stores)
};

// Writes `members` in order to a new archive at `path` (replacing it), stored without
// compression unless a member says otherwise. Throws FileError.
void write_zip(const std::string& path, const std::vector<ZipMember>& members);

// The bytes of the archive write_zip would write, made in memory (no temporary file: libzip's
// zip_close on a path writes a temporary of its own and renames it, which cost a tiny model more
// than its training). `path` only names the archive in errors. The members' bytes are freed as
// soon as the archive holds its own copy of them, before the result is taken out of it, so a
// large member is held twice at most, not three times. Throws FileError.
std::string zip_image(const std::string& path, std::vector<ZipMember> members);

}  // namespace nnfleet
