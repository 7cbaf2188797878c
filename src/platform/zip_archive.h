// Zip archives for .keras files, through libzip: bounded reads of whole members into memory, and
// writing an archive of in-memory members (stored uncompressed, as Keras's zipfile does).
// Failures throw FileError naming the archive and the member.
// Not thread-safe per object; separate objects may be used from separate threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

struct zip;

namespace nnfleet {

// What an archive's directory declares of a member, before anything of it is inflated.
struct ZipMemberInfo {
  uint64_t size = 0;             // inflated bytes, as declared
  uint64_t compressed_size = 0;  // bytes in the archive
  bool stored = true;            // not compressed
};

class ZipReader {
 public:
  // Opens an archive read-only with libzip's consistency checks. Throws FileError.
  explicit ZipReader(const std::string& path);
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

 private:
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
