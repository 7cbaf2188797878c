// libzip-backed reading of whole members into memory and writing of members from memory or files.
#include "io/zip_archive.h"

#include <unistd.h>
#include <zip.h>

#include "core/check.h"
#include "platform/files.h"

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

}  // namespace

ZipReader::ZipReader(const std::string& path) : path_(path) {
  std::string why;
  const int fd = open_regular_file(path, why);  // a FIFO would block libzip's open()
  if (fd < 0) fail("read", path, why);
  int code = 0;
  z_ = zip_fdopen(fd, ZIP_CHECKCONS, &code);  // takes the descriptor only on success
  if (!z_) {
    ::close(fd);
    fail("read", path, error_text(code) + " (not a zip archive, truncated or corrupt?)");
  }
  const zip_int64_t n = zip_get_num_entries(z_, 0);
  if (n < 0 || n > 100000) {
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

bool ZipReader::has(const std::string& member) const {
  return zip_name_locate(z_, member.c_str(), 0) >= 0;
}

namespace {

zip_uint64_t locate(zip_t* z, const std::string& path, const std::string& member) {
  const zip_int64_t index = zip_name_locate(z, member.c_str(), 0);
  if (index < 0) fail("read", path, "no member '" + member + "'");
  return static_cast<zip_uint64_t>(index);
}

zip_stat_t stat_of(zip_t* z, zip_uint64_t index, const std::string& path,
                   const std::string& member) {
  zip_stat_t st;
  zip_stat_init(&st);
  const zip_uint64_t need = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
  if (zip_stat_index(z, index, 0, &st) != 0 || (st.valid & need) != need)
    fail("read", path, "cannot read the header of member '" + member + "'");
  return st;
}

}  // namespace

ZipMemberInfo ZipReader::info(const std::string& member) const {
  const zip_stat_t st = stat_of(z_, locate(z_, path_, member), path_, member);
  return {st.size, st.comp_size, st.comp_method == ZIP_CM_STORE};
}

std::string ZipReader::read(const std::string& member, uint64_t max_bytes) const {
  const zip_uint64_t index = locate(z_, path_, member);
  const zip_stat_t st = stat_of(z_, index, path_, member);
  if (st.size > max_bytes)
    fail("read", path_,
         "member '" + member + "' is " + std::to_string(st.size) + " bytes; expected at most " +
             std::to_string(max_bytes));
  zip_file_t* f = zip_fopen_index(z_, index, 0);
  if (!f) fail("read", path_, "cannot open member '" + member + "': " + zip_strerror(z_));
  std::string out(static_cast<size_t>(st.size), '\0');
  uint64_t got = 0;
  bool ok = true;
  std::string why;
  while (got < st.size) {
    const zip_int64_t r = zip_fread(f, out.data() + got, st.size - got);
    if (r < 0) {
      ok = false;
      why = zip_error_strerror(zip_file_get_error(f));
      break;
    }
    if (r == 0) break;
    got += static_cast<uint64_t>(r);
  }
  // Reading past the end makes libzip verify the CRC; a byte there means the data inflates to
  // more than the header declares (a bomb's lie), and nothing more of it is inflated.
  char extra = 0;
  zip_int64_t past = 0;
  if (ok && got == st.size && (past = zip_fread(f, &extra, 1)) < 0) {
    ok = false;
    why = zip_error_strerror(zip_file_get_error(f));
  }
  zip_fclose(f);
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
