// RAII wrappers over the HDF5 C API with every failure turned into FileError.
#include "io/keras/hdf5.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "platform/file.h"
#include "platform/files.h"

namespace nnfleet::h5 {
namespace {

std::string join(const std::string& base, const std::string& name) {
  if (name.empty()) return base;
  if (base.empty() || base == "/") return name;
  return base + "/" + name;
}

// Splits "a/b\c/d" into {"a", "b\c", "d"} (HDF5 separates on '/' only).
std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string::npos ? path.size() : slash;
    if (end > start) out.push_back(path.substr(start, end - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return out;
}

// H5I type of the object at `name` below `loc`, or H5I_BADID when any component is missing.
H5I_type_t object_type(hid_t loc, const std::string& name) {
  std::string prefix;
  const auto parts = components(name);
  if (parts.empty()) return H5I_BADID;
  for (size_t i = 0; i < parts.size(); ++i) {
    prefix = prefix.empty() ? parts[i] : prefix + "/" + parts[i];
    if (H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return H5I_BADID;
  }
  Handle o(H5Oopen(loc, prefix.c_str(), H5P_DEFAULT), H5Oclose);
  if (!o.valid()) return H5I_BADID;
  return H5Iget_type(o.get());
}

[[noreturn]] void throw_at(const std::string& verb, const std::string& file,
                           const std::string& what, const std::string& path) {
  std::string msg = "failed to " + verb + " HDF5 file '" + file + "': " + what;
  if (!path.empty()) msg += " '" + path + "'";
  throw FileError(msg);
}

uint64_t little_endian(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

}  // namespace

// The bytes of a file on disk or in memory, and the global heap collections read from it.
class RawSource {
 public:
  RawSource(std::string display, std::string path, const std::string* image)
      : display_(std::move(display)), path_(std::move(path)), image_(image) {
    if (image_) {
      size_ = image_->size();
    } else {
      std::error_code ec;
      size_ = std::filesystem::file_size(path_, ec);
      if (ec) size_ = 0;
    }
  }
  void set_layout(uint64_t base, size_t sizeof_addr, size_t sizeof_size) {
    base_ = base;
    sizeof_addr_ = sizeof_addr;
    sizeof_size_ = sizeof_size;
  }
  size_t sizeof_addr() const { return sizeof_addr_; }

  // Object `idx` of the global heap collection at `addr`, cut to `len` bytes.
  std::string heap_object(uint64_t addr, uint32_t idx, uint32_t len, const std::string& at) {
    const Collection& c = collection(addr, at);
    auto it = c.objects.find(idx);
    if (it == c.objects.end() || it->second.second < len)
      throw_at("read", display_, "corrupt string (bad global heap reference) in attribute", at);
    return c.bytes.substr(it->second.first, len);
  }

 private:
  struct Collection {
    std::string bytes;
    std::map<uint32_t, std::pair<size_t, size_t>> objects;  // index -> (offset, size)
  };

  std::string read(uint64_t pos, size_t n, const std::string& at) {
    if (pos > size_ || n > size_ - pos)
      throw_at("read", display_, "corrupt string (global heap beyond the end of the file) in", at);
    if (image_) return image_->substr(static_cast<size_t>(pos), n);
    std::string why;
    nnfleet::File f = nnfleet::File::open_regular(path_, why);
    std::string out(n, '\0');
    size_t got = 0;
    if (!f.is_open() || !f.pread_full(out.data(), n, pos, got) || got != n)
      throw_at("read", display_, "cannot read the global heap for", at);
    return out;
  }

  // Reads and validates a collection as HDF5's H5HG__cache_heap_deserialize walks it, refusing
  // every size that would make that walk leave the collection.
  const Collection& collection(uint64_t addr, const std::string& at) {
    auto found = cache_.find(addr);
    if (found != cache_.end()) return found->second;
    auto bad = [&]() {
      throw_at("read", display_, "corrupt global heap (variable-length strings) read for", at);
    };
    const size_t hdr = 8 + sizeof_size_;      // "GCOL", version, reserved, collection size
    const size_t obj_hdr = 8 + sizeof_size_;  // index, refcount, reserved, object size
    if (sizeof_size_ < 2 || sizeof_size_ > 8 || addr > UINT64_MAX - base_) bad();
    const std::string head = read(base_ + addr, hdr, at);
    const auto* h = reinterpret_cast<const unsigned char*>(head.data());
    if (std::memcmp(h, "GCOL", 4) != 0 || h[4] != 1) bad();
    const uint64_t size = little_endian(h + 8, sizeof_size_);
    if (size < hdr || size > (uint64_t{1} << 30)) bad();
    Collection c;
    c.bytes = read(base_ + addr, static_cast<size_t>(size), at);
    const auto* b = reinterpret_cast<const unsigned char*>(c.bytes.data());
    size_t p = hdr;
    while (p < size) {
      if (p + obj_hdr > size) break;  // a tail too small for an object is free space
      const uint32_t idx = static_cast<uint32_t>(little_endian(b + p, 2));
      const uint64_t osize = little_endian(b + p + 8, sizeof_size_);
      if (osize > size) bad();
      const uint64_t need = idx > 0 ? obj_hdr + ((osize + 7) & ~uint64_t{7}) : osize;
      if (need < obj_hdr || need > size - p) bad();
      if (idx > 0 && !c.objects.emplace(idx, std::make_pair(p + obj_hdr, osize)).second) bad();
      p += static_cast<size_t>(need);
    }
    return cache_.emplace(addr, std::move(c)).first->second;
  }

  std::string display_, path_;
  const std::string* image_ = nullptr;
  uint64_t size_ = 0, base_ = 0;
  size_t sizeof_addr_ = 8, sizeof_size_ = 8;
  std::map<uint64_t, Collection> cache_;
};

namespace {

// Reading a variable-length string attribute as its raw heap IDs: a conversion from the
// vlen-string type to an opaque type of the same size that leaves the bytes in place.
constexpr const char* kRawVlenTag = "nnfleet-raw-vlen-heap-id";

herr_t raw_vlen_conv(hid_t src, hid_t dst, H5T_cdata_t* cdata, size_t, size_t, size_t, void*, void*,
                     hid_t) {
  if (cdata->command != H5T_CONV_INIT) return 0;
  if (H5Tis_variable_str(src) <= 0 || H5Tget_class(dst) != H5T_OPAQUE) return -1;
  char* tag = H5Tget_tag(dst);
  const bool ours = tag && std::strcmp(tag, kRawVlenTag) == 0;
  if (tag) H5free_memory(tag);
  if (!ours || H5Tget_size(src) != H5Tget_size(dst)) return -1;
  cdata->need_bkg = H5T_BKG_NO;
  return 0;
}

bool register_raw_vlen() {
  Handle src(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(src.get(), H5T_VARIABLE);
  Handle dst(H5Tcreate(H5T_OPAQUE, 16), H5Tclose);
  H5Tset_tag(dst.get(), kRawVlenTag);
  return H5Tregister(H5T_PERS_SOFT, "nnfleet_raw_vlen", src.get(), dst.get(), raw_vlen_conv) >= 0;
}

// The strings of an attribute of string type, as stored (vlen or fixed, any character set).
std::vector<std::string> read_strings(hid_t attr, const std::string& file, const std::string& at,
                                      RawSource* raw) {
  Handle ftype(H5Aget_type(attr), H5Tclose);
  Handle space(H5Aget_space(attr), H5Sclose);
  if (!ftype.valid() || !space.valid()) throw_at("read", file, "unreadable attribute", at);
  const hssize_t npoints = H5Sget_simple_extent_npoints(space.get());
  if (npoints < 0) throw_at("read", file, "unreadable attribute", at);
  const size_t count = static_cast<size_t>(npoints);
  std::vector<std::string> out;
  if (count == 0) return out;
  const htri_t vlen = H5Tis_variable_str(ftype.get());
  if (vlen < 0) throw_at("read", file, "unreadable string type of attribute", at);
  if (vlen > 0) {
    // Each element is stored as (length u32, collection address, object index u32).
    static const bool registered = register_raw_vlen();
    if (!registered || !raw) throw_at("read", file, "cannot read variable-length strings of", at);
    const size_t id_size = 4 + raw->sizeof_addr() + 4;
    if (count > kMaxAttrBytes / id_size) throw_at("read", file, "implausibly large attribute", at);
    Handle mtype(H5Tcreate(H5T_OPAQUE, id_size), H5Tclose);
    if (!mtype.valid() || H5Tset_tag(mtype.get(), kRawVlenTag) < 0)
      throw_at("read", file, "unreadable string type of attribute", at);
    std::string ids(count * id_size, '\0');
    if (H5Aread(attr, mtype.get(), ids.data()) < 0)
      throw_at("read", file, "unreadable attribute (corrupt or truncated file?)", at);
    size_t total = 0;
    for (size_t i = 0; i < count; ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(ids.data()) + i * id_size;
      const auto len = static_cast<uint32_t>(little_endian(p, 4));
      const uint64_t addr = little_endian(p + 4, raw->sizeof_addr());
      const auto idx = static_cast<uint32_t>(little_endian(p + 4 + raw->sizeof_addr(), 4));
      total += len;
      if (total > kMaxAttrBytes) throw_at("read", file, "implausibly large attribute", at);
      std::string s = len == 0 ? std::string() : raw->heap_object(addr, idx, len, at);
      const size_t nul = s.find('\0');
      if (nul != std::string::npos) s.resize(nul);
      out.push_back(std::move(s));
    }
    return out;
  }
  const size_t width = H5Tget_size(ftype.get());
  if (width == 0 || width > kMaxAttrBytes || count > kMaxAttrBytes / width)
    throw_at("read", file, "implausibly large attribute", at);
  const H5T_str_t pad = H5Tget_strpad(ftype.get());
  std::string buf(width * count, '\0');
  if (H5Aread(attr, ftype.get(), buf.data()) < 0)
    throw_at("read", file, "unreadable attribute (corrupt or truncated file?)", at);
  for (size_t i = 0; i < count; ++i) {
    std::string s = buf.substr(i * width, width);
    const size_t nul = s.find('\0');
    if (nul != std::string::npos) s.resize(nul);
    if (pad == H5T_STR_SPACEPAD)
      while (!s.empty() && s.back() == ' ') s.pop_back();
    out.push_back(std::move(s));
  }
  return out;
}

Handle string_type(StrType type, size_t width) {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  if (type == StrType::kFixedAscii) {
    H5Tset_size(t.get(), std::max<size_t>(width, 1));
    H5Tset_strpad(t.get(), H5T_STR_NULLPAD);
    H5Tset_cset(t.get(), H5T_CSET_ASCII);
  } else {
    H5Tset_size(t.get(), H5T_VARIABLE);
    H5Tset_cset(t.get(), type == StrType::kVlenUtf8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
  }
  return t;
}

}  // namespace

std::unique_lock<std::recursive_mutex> hdf5_lock() {
  static std::recursive_mutex m;
  std::unique_lock<std::recursive_mutex> lock(m);
  // Silences HDF5's printing of its error stack (per thread in thread-safe builds).
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  return lock;
}

void Handle::reset() {
  if (id_ >= 0 && close_) close_(id_);
  id_ = -1;
}

// --- Group -----------------------------------------------------------------------------------

std::string Group::child_path(const std::string& name) const { return join(path_, name); }

void Group::fail(const std::string& what, const std::string& name) const {
  throw_at("read", file_, what, child_path(name));
}

bool Group::has(const std::string& name) const { return object_type(id(), name) != H5I_BADID; }
bool Group::has_group(const std::string& name) const {
  return object_type(id(), name) == H5I_GROUP;
}
bool Group::has_dataset(const std::string& name) const {
  return object_type(id(), name) == H5I_DATASET;
}

Group Group::group(const std::string& name) const {
  if (!has_group(name)) fail("no group", name);
  Handle g(H5Gopen2(id(), name.c_str(), H5P_DEFAULT), H5Gclose);
  if (!g.valid()) fail("cannot open group (corrupt file?)", name);
  return Group(std::move(g), file_, child_path(name), raw_);
}

Dataset Group::dataset(const std::string& name) const {
  if (!has_dataset(name)) fail("no dataset", name);
  Handle d(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!d.valid()) fail("cannot open dataset (corrupt file?)", name);
  return Dataset(std::move(d), file_, child_path(name), raw_);
}

std::vector<std::string> Group::children() const {
  struct Ctx {
    std::vector<std::string> names;
  } ctx;
  auto cb = [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
    auto* c = static_cast<Ctx*>(data);
    if (c->names.size() >= 1000000) return -1;
    c->names.emplace_back(name);
    return 0;
  };
  hsize_t idx = 0;
  if (H5Literate(id(), H5_INDEX_NAME, H5_ITER_INC, &idx, cb, &ctx) < 0)
    fail("cannot list the members of group (corrupt file?)");
  return ctx.names;
}

bool Group::has_attr(const std::string& name) const { return H5Aexists(id(), name.c_str()) > 0; }

std::vector<std::string> Group::attr_names() const {
  std::vector<std::string> names;
  auto cb = [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
    auto* v = static_cast<std::vector<std::string>*>(data);
    if (v->size() >= 100000) return -1;
    v->emplace_back(name);
    return 0;
  };
  hsize_t idx = 0;
  if (H5Aiterate2(id(), H5_INDEX_NAME, H5_ITER_INC, &idx, cb, &names) < 0)
    fail("cannot list the attributes of group (corrupt file?)");
  return names;
}

std::string Group::string_attr(const std::string& name) const {
  const std::string at = child_path("@" + name);
  if (!has_attr(name)) throw_at("read", file_, "missing attribute", at);
  Handle a(H5Aopen(id(), name.c_str(), H5P_DEFAULT), H5Aclose);
  if (!a.valid()) throw_at("read", file_, "cannot open attribute (corrupt file?)", at);
  Handle t(H5Aget_type(a.get()), H5Tclose);
  if (!t.valid() || H5Tget_class(t.get()) != H5T_STRING)
    throw_at("read", file_, "attribute is not a string", at);
  auto v = read_strings(a.get(), file_, at, raw_.get());
  if (v.size() != 1)
    throw_at("read", file_, "expected one string, got " + std::to_string(v.size()) + " in", at);
  return v[0];
}

std::vector<std::string> Group::string_list_attr(const std::string& name) const {
  auto read_one = [&](const std::string& n) {
    const std::string at = child_path("@" + n);
    Handle a(H5Aopen(id(), n.c_str(), H5P_DEFAULT), H5Aclose);
    if (!a.valid()) throw_at("read", file_, "cannot open attribute (corrupt file?)", at);
    Handle t(H5Aget_type(a.get()), H5Tclose);
    Handle s(H5Aget_space(a.get()), H5Sclose);
    if (!t.valid() || !s.valid()) throw_at("read", file_, "unreadable attribute", at);
    if (H5Tget_class(t.get()) != H5T_STRING) {
      // h5py stores an empty Python list as an empty float64 array.
      if (H5Sget_simple_extent_npoints(s.get()) == 0) return std::vector<std::string>{};
      throw_at("read", file_, "attribute is not a list of strings", at);
    }
    return read_strings(a.get(), file_, at, raw_.get());
  };
  if (has_attr(name)) return read_one(name);
  // Keras splits lists longer than 64 KB into name0, name1, ...
  std::vector<std::string> out;
  for (int i = 0; has_attr(name + std::to_string(i)); ++i) {
    auto part = read_one(name + std::to_string(i));
    out.insert(out.end(), part.begin(), part.end());
  }
  if (!has_attr(name + "0")) throw_at("read", file_, "missing attribute", child_path("@" + name));
  return out;
}

Group Group::create_group(const std::string& name) {
  Handle g(H5Gcreate2(id(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!g.valid()) throw_at("write", file_, "cannot create group", child_path(name));
  return Group(std::move(g), file_, child_path(name), raw_);
}

void Group::write_string_attr(const std::string& name, const std::string& value, StrType type) {
  Handle t = string_type(type, value.size());
  Handle s(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(H5Acreate2(id(), name.c_str(), t.get(), s.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  herr_t rc = -1;
  if (a.valid()) {
    if (type == StrType::kFixedAscii) {
      std::string buf = value.empty() ? std::string(1, '\0') : value;
      rc = H5Awrite(a.get(), t.get(), buf.data());
    } else {
      const char* p = value.c_str();
      rc = H5Awrite(a.get(), t.get(), &p);
    }
  }
  if (rc < 0) throw_at("write", file_, "cannot write attribute", child_path("@" + name));
}

void Group::write_string_list_attr(const std::string& name, const std::vector<std::string>& values,
                                   StrType type) {
  const std::string at = child_path("@" + name);
  const hsize_t n = values.size();
  Handle s(H5Screate_simple(1, &n, nullptr), H5Sclose);
  herr_t rc = -1;
  if (values.empty()) {
    Handle a(H5Acreate2(id(), name.c_str(), H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose);
    double dummy = 0;
    if (a.valid()) rc = H5Awrite(a.get(), H5T_NATIVE_DOUBLE, &dummy);
  } else if (type == StrType::kFixedAscii) {
    size_t width = 1;
    for (const auto& v : values) width = std::max(width, v.size());
    Handle t = string_type(type, width);
    std::string buf(width * values.size(), '\0');
    for (size_t i = 0; i < values.size(); ++i)
      std::memcpy(buf.data() + i * width, values[i].data(), values[i].size());
    Handle a(H5Acreate2(id(), name.c_str(), t.get(), s.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (a.valid()) rc = H5Awrite(a.get(), t.get(), buf.data());
  } else {
    Handle t = string_type(type, 0);
    std::vector<const char*> ptrs;
    for (const auto& v : values) ptrs.push_back(v.c_str());
    Handle a(H5Acreate2(id(), name.c_str(), t.get(), s.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (a.valid()) rc = H5Awrite(a.get(), t.get(), ptrs.data());
  }
  if (rc < 0) throw_at("write", file_, "cannot write attribute", at);
}

namespace {

// Dataset creation without modification times (HDF5 stores one per dataset by default), so that
// equal contents make equal files.
hid_t untimed_dcpl() {
  static const hid_t dcpl = [] {
    const hid_t p = H5Pcreate(H5P_DATASET_CREATE);
    NNFLEET_CHECK(p >= 0 && H5Pset_obj_track_times(p, 0) >= 0);
    return p;
  }();
  return dcpl;
}

// Where a written dataset's bytes start in its file, or kNoAddress.
uint64_t data_address(hid_t ds) {
  const haddr_t a = H5Dget_offset(ds);
  return a == HADDR_UNDEF ? kNoAddress : static_cast<uint64_t>(a);
}

}  // namespace

uint64_t Group::write_floats(const std::string& name, const std::vector<int64_t>& dims,
                             const float* data) {
  std::vector<hsize_t> d(dims.begin(), dims.end());
  Handle s(d.empty() ? H5Screate(H5S_SCALAR)
                     : H5Screate_simple(static_cast<int>(d.size()), d.data(), nullptr),
           H5Sclose);
  Handle ds(H5Dcreate2(id(), name.c_str(), H5T_IEEE_F32LE, s.get(), H5P_DEFAULT, untimed_dcpl(),
                       H5P_DEFAULT),
            H5Dclose);
  size_t n = 1;
  for (int64_t v : dims) n *= static_cast<size_t>(v);
  herr_t rc = -1;
  if (ds.valid()) {
    // HDF5 wants a non-null buffer even for zero elements.
    const float dummy = 0.0f;
    rc =
        H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, n == 0 ? &dummy : data);
  }
  if (rc < 0) throw_at("write", file_, "cannot write dataset", child_path(name));
  return n == 0 ? kNoAddress : data_address(ds.get());
}

uint64_t Group::write_int64_scalar(const std::string& name, int64_t v) {
  Handle s(H5Screate(H5S_SCALAR), H5Sclose);
  Handle ds(H5Dcreate2(id(), name.c_str(), H5T_STD_I64LE, s.get(), H5P_DEFAULT, untimed_dcpl(),
                       H5P_DEFAULT),
            H5Dclose);
  if (!ds.valid() || H5Dwrite(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0)
    throw_at("write", file_, "cannot write dataset", child_path(name));
  return data_address(ds.get());
}

// --- Dataset ---------------------------------------------------------------------------------

void Dataset::fail(const std::string& what) const { throw_at("read", file_, what, path_); }

std::vector<int64_t> Dataset::dims() const {
  Handle s(H5Dget_space(h_.get()), H5Sclose);
  if (!s.valid()) fail("cannot read the shape of dataset (corrupt file?)");
  const int rank = H5Sget_simple_extent_ndims(s.get());
  if (rank < 0 || rank > 32) fail("cannot read the shape of dataset (corrupt file?)");
  std::vector<hsize_t> d(static_cast<size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(s.get(), d.data(), nullptr) < 0)
    fail("cannot read the shape of dataset (corrupt file?)");
  return std::vector<int64_t>(d.begin(), d.end());
}

void Dataset::read_floats(float* out, size_t n) const {
  Handle t(H5Dget_type(h_.get()), H5Tclose);
  if (!t.valid()) fail("cannot read the type of dataset (corrupt file?)");
  const H5T_class_t cls = H5Tget_class(t.get());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER)
    fail("expected a numeric dataset (float or integer), got another type in");
  size_t count = 1;
  for (int64_t d : dims()) count *= static_cast<size_t>(d);
  if (count != n)
    fail("expected " + std::to_string(n) + " elements, got " + std::to_string(count) + " in");
  if (n == 0) return;
  if (H5Dread(h_.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
    fail("cannot read dataset (corrupt or truncated file?)");
}

int64_t Dataset::read_int64() const {
  Handle t(H5Dget_type(h_.get()), H5Tclose);
  if (!t.valid()) fail("cannot read the type of dataset (corrupt file?)");
  const H5T_class_t cls = H5Tget_class(t.get());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) fail("expected a numeric scalar in");
  size_t count = 1;
  for (int64_t d : dims()) count *= static_cast<size_t>(d);
  if (count != 1) fail("expected a scalar in");
  int64_t v = 0;
  if (H5Dread(h_.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0)
    fail("cannot read dataset (corrupt or truncated file?)");
  return v;
}

H5T_class_t Dataset::type_class() const {
  Handle t(H5Dget_type(h_.get()), H5Tclose);
  return t.valid() ? H5Tget_class(t.get()) : H5T_NO_CLASS;
}

size_t Dataset::type_size() const {
  Handle t(H5Dget_type(h_.get()), H5Tclose);
  return t.valid() ? H5Tget_size(t.get()) : 0;
}

bool Dataset::has_attr(const std::string& name) const {
  return H5Aexists(h_.get(), name.c_str()) > 0;
}

std::string Dataset::string_attr(const std::string& name) const {
  Handle a(H5Aopen(h_.get(), name.c_str(), H5P_DEFAULT), H5Aclose);
  if (!a.valid()) throw_at("read", file_, "missing attribute", path_ + "/@" + name);
  auto v = read_strings(a.get(), file_, path_ + "/@" + name, raw_.get());
  if (v.size() != 1) throw_at("read", file_, "expected one string in", path_ + "/@" + name);
  return v[0];
}

// --- File ------------------------------------------------------------------------------------

File::File(Handle f, std::string name, std::shared_ptr<RawSource> raw)
    : file_(std::move(f)), name_(std::move(name)) {
  Handle g(H5Gopen2(file_.get(), "/", H5P_DEFAULT), H5Gclose);
  if (!g.valid()) throw_at("read", name_, "cannot open the root group (corrupt file?)", "");
  if (raw) {
    Handle fcpl(H5Fget_create_plist(file_.get()), H5Pclose);
    size_t sizeof_addr = 0, sizeof_size = 0;
    hsize_t userblock = 0;
    if (!fcpl.valid() || H5Pget_sizes(fcpl.get(), &sizeof_addr, &sizeof_size) < 0 ||
        H5Pget_userblock(fcpl.get(), &userblock) < 0 || sizeof_addr < 2 || sizeof_addr > 8)
      throw_at("read", name_, "cannot read the file's layout (corrupt file?)", "");
    raw->set_layout(userblock, sizeof_addr, sizeof_size);
  }
  root_ = Group(std::move(g), name_, "/", std::move(raw));
}

File File::open(const std::string& path) {
  // HDF5 opens the path itself: refuse a FIFO or device first, or its open() would block forever.
  std::string why;
  if (!nnfleet::File::open_regular(path, why).is_open())
    throw FileError("failed to read HDF5 file '" + path + "': " + why);
  auto lock = hdf5_lock();
  const htri_t is = H5Fis_hdf5(path.c_str());
  if (is <= 0)
    throw FileError("failed to read HDF5 file '" + path + "': " +
                    (is == 0 ? std::string("not an HDF5 file (no HDF5 signature)")
                             : std::string("cannot open it (missing or unreadable?)")));
  Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.valid())
    throw FileError("failed to read HDF5 file '" + path +
                    "': cannot open it (corrupt or truncated file?)");
  return File(std::move(f), path, std::make_shared<RawSource>(path, path, nullptr));
}

namespace {
// The name HDF5 gets for in-memory files. The core driver must not find a real file under it
// (it would look at that file), and nothing can exist below /dev/null.
constexpr const char* kImageName = "/dev/null/nnfleet-in-memory.h5";
}  // namespace

namespace {

// File-image callbacks that let HDF5 read the caller's bytes in place (as H5LTopen_file_image's
// DONT_COPY does): by default the property list takes a copy of the image and the core driver
// another, so a weights member was held three times while it was read. The image is opened
// read-only and outlives the File (open_image's contract), so nothing is copied, resized or freed.
// `udata` is the caller's std::string.
void* image_in_place(size_t size, H5FD_file_image_op_t, void* udata) {
  const auto* bytes = static_cast<const std::string*>(udata);
  return size == bytes->size() ? const_cast<char*>(bytes->data()) : nullptr;
}
void* image_same(void* dest, const void* src, size_t, H5FD_file_image_op_t, void*) {
  return dest == src ? dest : nullptr;
}
void* image_no_realloc(void*, size_t, H5FD_file_image_op_t, void*) { return nullptr; }
herr_t image_keep(void*, H5FD_file_image_op_t, void*) { return 0; }
void* udata_same(void* udata) { return udata; }
herr_t udata_keep(void*) { return 0; }

// File-image callbacks with these three memory operations on `udata`; the image is never freed
// by libhdf5 and the udata never copied (the File's string outlives the file).
H5FD_file_image_callbacks_t image_callbacks(
    void* (*get)(size_t, H5FD_file_image_op_t, void*),
    void* (*copy)(void*, const void*, size_t, H5FD_file_image_op_t, void*),
    void* (*resize)(void*, size_t, H5FD_file_image_op_t, void*), void* udata) {
  H5FD_file_image_callbacks_t c;
  c.image_malloc = get;
  c.image_memcpy = copy;
  c.image_realloc = resize;
  c.image_free = image_keep;
  c.udata_copy = udata_same;
  c.udata_free = udata_keep;
  c.udata = udata;
  return c;
}

}  // namespace

File File::open_image(const std::string& name, const std::string& bytes) {
  auto lock = hdf5_lock();
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5FD_file_image_callbacks_t in_place = image_callbacks(
      image_in_place, image_same, image_no_realloc, const_cast<std::string*>(&bytes));
  if (!fapl.valid() || H5Pset_fapl_core(fapl.get(), 1 << 16, 0) < 0 ||
      H5Pset_file_image_callbacks(fapl.get(), &in_place) < 0 ||
      H5Pset_file_image(fapl.get(), const_cast<char*>(bytes.data()), bytes.size()) < 0)
    throw FileError("failed to read HDF5 file '" + name + "': cannot set up an in-memory image");
  Handle f(H5Fopen(kImageName, H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!f.valid())
    throw FileError("failed to read HDF5 file '" + name +
                    "': cannot open it (not HDF5, corrupt or truncated?)");
  return File(std::move(f), name, std::make_shared<RawSource>(name, "", &bytes));
}

namespace {

// A created file larger than this is written into memory the File owns, taken this much at a time.
constexpr size_t kOwnedImageStep = size_t{64} << 10;

// File-image callbacks that make a created file's memory a std::string (`udata`) the File owns,
// so that close_image() hands it over instead of copying it out: the core driver's realloc is the
// string's resize (contents kept, as realloc's), and its free at close leaves the string alone.
void* owned_resize(void*, size_t size, H5FD_file_image_op_t, void* udata) {
  auto* s = static_cast<std::string*>(udata);
  s->resize(size);
  return s->data();
}
void* owned_malloc(size_t size, H5FD_file_image_op_t op, void* udata) {
  return owned_resize(nullptr, size, op, udata);
}
void* owned_copy(void* dest, const void* src, size_t n, H5FD_file_image_op_t, void*) {
  return std::memcpy(dest, src, n);
}

}  // namespace

File File::create(const std::string& name, size_t expected_bytes) {
  auto lock = hdf5_lock();
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  // The core driver zeroes each step it takes: memory for the whole file is reserved at once
  // (untouched, so not yet resident), but taken in steps of at most 64 KB: one step of the
  // file's size made all of it resident at the first write, while the Builder still held every
  // number (m8's 8 MB twice at its save). A small model's file is one step of libhdf5's own
  // memory, copied out at close as before (a fixed megabyte cost it more than its training; an
  // owned image kept its step's capacity, and a run of 4,000 tiny models peaked 2.6 MB higher).
  const size_t room = (expected_bytes + (size_t{16} << 10) + 4095) & ~size_t{4095};
  const size_t step = std::min(room, kOwnedImageStep);
  const bool owned_image = room > kOwnedImageStep;
  // Groups' symbol-table nodes sized for the few entries a model file's groups have (K = 1, in
  // the version-0 superblock every HDF5 reader takes, as Keras's own files): a tiny model's
  // model.weights.h5 went from 23.8 KB to 19.1 KB, bytes every model file is written with.
  Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  auto image = owned_image ? std::make_unique<std::string>() : nullptr;
  if (image) image->reserve(room);
  H5FD_file_image_callbacks_t owned =
      image_callbacks(owned_malloc, owned_copy, owned_resize, image.get());
  if (!fapl.valid() || H5Pset_fapl_core(fapl.get(), step, 0) < 0 ||
      (image && H5Pset_file_image_callbacks(fapl.get(), &owned) < 0) || !fcpl.valid() ||
      H5Pset_sym_k(fcpl.get(), 1, 1) < 0)
    throw FileError("failed to write HDF5 file '" + name + "': cannot set up an in-memory file");
  Handle f(H5Fcreate(kImageName, H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose);
  if (!f.valid()) throw FileError("failed to write HDF5 file '" + name + "': cannot create it");
  File file(std::move(f), name, nullptr);
  file.image_ = std::move(image);
  return file;
}

std::string File::close_image() {
  if (!image_) return close_image_copy();  // a small file in libhdf5's memory
  auto lock = hdf5_lock();
  root_ = Group();
  NNFLEET_CHECK(file_.valid());
  const hid_t id = file_.get();
  ssize_t n = -1;
  // The file's size (its end of allocation) after the flush; the driver's memory is whole steps.
  if (H5Fflush(id, H5F_SCOPE_GLOBAL) >= 0) n = H5Fget_file_image(id, nullptr, 0);
  file_.reset();
  if (n <= 0) throw FileError("failed to write HDF5 file '" + name_ + "': cannot take its image");
  std::string image = std::move(*image_);
  image_.reset();
  image.resize(static_cast<size_t>(n));  // beyond the memory: zeros, as H5Fget_file_image reads
  return image;
}

std::string File::close_image_copy() {
  auto lock = hdf5_lock();
  root_ = Group();
  NNFLEET_CHECK(file_.valid());
  const hid_t id = file_.get();
  std::string image;
  ssize_t n = -1;
  if (H5Fflush(id, H5F_SCOPE_GLOBAL) >= 0) n = H5Fget_file_image(id, nullptr, 0);
  if (n > 0) {
    image.resize(static_cast<size_t>(n));
    if (H5Fget_file_image(id, image.data(), image.size()) != n) n = -1;
  }
  file_.reset();
  if (n <= 0) throw FileError("failed to write HDF5 file '" + name_ + "': cannot take its image");
  return image;
}

}  // namespace nnfleet::h5
