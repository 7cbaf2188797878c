// libzip-backed reading of whole members into memory or as streams, and writing of members from
// memory or files.
#include "platform/zip_archive.h"

#include <zip.h>

#include <utility>

#include "core/check.h"
#include "platform/file.h"

namespace nnfleet {
namespace {

std::string error_text(int code) {
  zip_error_t err;
  zip_error_init_with_code(&err, code);
  std::string msg = zip_error_strerror(&err);
  zip_error_fini(&err);
  return msg;
}

[[noreturn]] void fail(const std::string& verb, const std::string& path, const std::string& what) {
  throw FileError("failed to " + verb + " zip archive '" + path + "': " + what);
}

// More members than this in a .keras archive are refused before their names are read.
constexpr int64_t kMaxMembers = 100000;

}  // namespace

ZipReader::ZipReader(const std::string& path)
    : ZipReader(path, true, kMaxMembers, [&](OpenFault fault, const std::string& why) {
        if (fault == OpenFault::kFile) fail("read", path, why);
        fail("read", path, why + " (not a zip archive, truncated or corrupt?)");
      }) {}

ZipReader::ZipReader(const std::string& path, const OpenFail& fail)
    : ZipReader(path, false, -1, fail) {}

ZipReader::ZipReader(const std::string& path, bool check_consistency, int64_t max_members,
                     const OpenFail& open_fail)
    : path_(path) {
  const auto refuse = [&](OpenFault fault, const std::string& why) {
    open_fail(fault, why);
    NNFLEET_CHECK(!"an OpenFail returned");
  };
  std::string why;
  File file = File::open_regular(path, why);  // a FIFO would block libzip's open()
  if (!file.is_open()) refuse(OpenFault::kFile, why);
  int code = 0;
  // zip_fdopen takes the descriptor only on success.
  z_ = zip_fdopen(file.fd(), check_consistency ? ZIP_CHECKCONS : 0, &code);
  if (!z_) refuse(OpenFault::kNotZip, error_text(code));
  file.release();
  const zip_int64_t n = zip_get_num_entries(z_, 0);
  if (max_members >= 0 && (n < 0 || n > max_members)) {
    zip_discard(z_);
    z_ = nullptr;
    fail("read", path, "implausible number of members");
  }
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* name = zip_get_name(z_, static_cast<zip_uint64_t>(i), 0);
    names_.push_back(name ? name : "");
  }
}

ZipReader::~ZipReader() {
  if (z_) zip_discard(z_);
}

bool ZipReader::has(const std::string& member) const { return index_of(member) >= 0; }

int64_t ZipReader::index_of(const std::string& member) const {
  return zip_name_locate(z_, member.c_str(), 0);
}

bool ZipReader::stat(uint64_t index, ZipMemberInfo& out) const {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(z_, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE)) return false;
  const zip_uint64_t all = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
  out = {st.size, st.comp_size, st.comp_method == ZIP_CM_STORE, (st.valid & all) == all};
  return true;
}

ZipMemberStream ZipReader::open_member(uint64_t index) const {
  return ZipMemberStream(zip_fopen_index(z_, index, 0));
}

std::string ZipReader::last_error() const { return zip_strerror(z_); }

ZipMemberStream::~ZipMemberStream() {
  if (f_) zip_fclose(f_);
}

ZipMemberStream::ZipMemberStream(ZipMemberStream&& o) noexcept : f_(std::exchange(o.f_, nullptr)) {}

ZipMemberStream& ZipMemberStream::operator=(ZipMemberStream&& o) noexcept {
  if (this != &o) {
    if (f_) zip_fclose(f_);
    f_ = std::exchange(o.f_, nullptr);
  }
  return *this;
}

bool ZipMemberStream::read(void* dst, size_t n, size_t& got, std::string& why) {
  got = 0;
  while (got < n) {
    const zip_int64_t r = zip_fread(f_, static_cast<char*>(dst) + got, n - got);
    if (r < 0) {
      why = zip_error_strerror(zip_file_get_error(f_));
      return false;
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return true;
}

namespace {

uint64_t locate(const ZipReader& z, const std::string& path, const std::string& member) {
  const int64_t index = z.index_of(member);
  if (index < 0) fail("read", path, "no member '" + member + "'");
  return static_cast<uint64_t>(index);
}

ZipMemberInfo stat_of(const ZipReader& z, uint64_t index, const std::string& path,
                      const std::string& member) {
  ZipMemberInfo st;
  if (!z.stat(index, st) || !st.complete)
    fail("read", path, "cannot read the header of member '" + member + "'");
  return st;
}

}  // namespace

ZipMemberInfo ZipReader::info(const std::string& member) const {
  return stat_of(*this, locate(*this, path_, member), path_, member);
}

std::string ZipReader::read(const std::string& member, uint64_t max_bytes) const {
  const uint64_t index = locate(*this, path_, member);
  const ZipMemberInfo st = stat_of(*this, index, path_, member);
  if (st.size > max_bytes)
    fail("read", path_,
         "member '" + member + "' is " + std::to_string(st.size) + " bytes; expected at most " +
             std::to_string(max_bytes));
  ZipMemberStream f = open_member(index);
  if (!f.is_open()) fail("read", path_, "cannot open member '" + member + "': " + last_error());
  std::string out(static_cast<size_t>(st.size), '\0');
  size_t got = 0, past = 0;
  std::string why;
  bool ok = f.read(out.data(), out.size(), got, why);
  // Reading past the end makes libzip verify the CRC; a byte there means the data inflates to
  // more than the header declares (a bomb's lie), and nothing more of it is inflated.
  char extra = 0;
  if (ok && got == st.size) ok = f.read(&extra, 1, past, why);
  f = ZipMemberStream();
  if (!ok) fail("read", path_, "member '" + member + "' is corrupt: " + why);
  if (past > 0)
    fail("read", path_,
         "member '" + member + "' inflates to more than the " + std::to_string(st.size) +
             " bytes its header declares (corrupt, or a zip bomb)");
  if (got != st.size)
    fail("read", path_,
         "member '" + member + "' is truncated; expected " + std::to_string(st.size) +
             " bytes, got " + std::to_string(got));
  return out;
}

namespace {

// Adds `members` to `z`, stored or deflated. On failure discards `z` and throws FileError naming
// `path`.
void add_members(zip_t* z, const std::string& path, const std::vector<ZipMember>& members) {
  for (const auto& [name, bytes, file, deflate] : members) {
    zip_source_t* src = file.empty() ? zip_source_buffer(z, bytes.data(), bytes.size(), 0)
                                     : zip_source_file(z, file.c_str(), 0, -1);
    if (!src) {
      zip_discard(z);
      fail("write", path, "cannot add member '" + name + "'");
    }
    const zip_int64_t idx = zip_file_add(z, name.c_str(), src, ZIP_FL_ENC_UTF_8 | ZIP_FL_OVERWRITE);
    if (idx < 0) {
      zip_source_free(src);
      std::string why = zip_strerror(z);
      zip_discard(z);
      fail("write", path, "cannot add member '" + name + "': " + why);
    }
    const zip_int32_t method = deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE;
    if (zip_set_file_compression(z, static_cast<zip_uint64_t>(idx), method, 0) != 0) {
      std::string why = zip_strerror(z);
      zip_discard(z);
      fail("write", path, "cannot store member '" + name + "': " + why);
    }
  }
}

void close_or_fail(zip_t* z, const std::string& path) {
  if (zip_close(z) != 0) {
    std::string why = zip_strerror(z);
    zip_discard(z);
    fail("write", path, why);
  }
}

// The bytes a closed in-memory source holds.
std::string source_bytes(zip_source_t* src, const std::string& path) {
  std::string out;
  zip_stat_t st;
  zip_stat_init(&st);
  bool ok = zip_source_open(src) == 0;
  if (ok) {
    ok = zip_source_stat(src, &st) == 0 && (st.valid & ZIP_STAT_SIZE);
    if (ok) {
      out.resize(static_cast<size_t>(st.size));
      ok = zip_source_read(src, out.data(), st.size) == static_cast<zip_int64_t>(st.size);
    }
    zip_source_close(src);
  }
  if (!ok) fail("write", path, "cannot take the archive's bytes from memory");
  return out;
}

}  // namespace

void write_zip(const std::string& path, const std::vector<ZipMember>& members) {
  int code = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  if (!z) fail("write", path, error_text(code));
  add_members(z, path, members);
  close_or_fail(z, path);
}

std::string zip_image(const std::string& path, std::vector<ZipMember> members) {
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(nullptr, 0, 0, &err);
  zip_t* z = src ? zip_open_from_source(src, ZIP_TRUNCATE, &err) : nullptr;
  if (!z) {
    const std::string why = zip_error_strerror(&err);
    zip_error_fini(&err);
    if (src) zip_source_free(src);
    fail("write", path, "cannot make an archive in memory: " + why);
  }
  zip_error_fini(&err);
  zip_source_keep(src);  // zip_close would free it; its bytes are the result
  try {
    add_members(z, path, members);
    close_or_fail(z, path);
    // zip_close copied every member into src: m7's 14 MB of weights need not be held a third time
    // while src's bytes are copied out (W1's peak resident memory is taken while m7 is saved).
    std::vector<ZipMember>().swap(members);
    std::string out = source_bytes(src, path);
    zip_source_free(src);
    return out;
  } catch (...) {
    zip_source_free(src);
    throw;
  }
}

}  // namespace nnfleet
