// NumPy .npy files (format versions 1.0, 2.0 and 3.0) and .npz archives of them.
//
// An .npy file is the magic "\x93NUMPY", a version (major, minor), a little-endian header length
// (2 bytes in v1, 4 bytes in v2/v3), a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// and then the raw elements. The header is parsed by a small strict parser (never eval-like), the
// declared size is checked against the bytes present before anything is allocated, and the
// elements are read straight into the Array's storage. An .npz is a zip archive whose members
// are "<key>.npy" files, stored or deflated; platform/zip_archive.h reads them.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string_view>
#include <utility>

#include "core/limits.h"
#include "data/dataset.h"
#include "platform/file.h"
#include "platform/zip_archive.h"

namespace nnfleet {
namespace {

static_assert(std::endian::native == std::endian::little, "the NPY reader assumes little-endian");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr uint32_t kMaxHeaderLen = limits::kMaxNpyHeaderBytes;
constexpr int64_t kMaxElements = limits::kMaxArrayElements;
constexpr const char* kSupported = "|u1, |b1, |i1, <u2, <i2, <i4, <i8, <f4, <f8, <U";

// How a stored element type becomes an Array dtype (kUnicode: UTF-32 code points to UTF-8).
enum class Convert { kNone, kBool, kI8, kU16, kI16, kUnicode };

struct NpyDtype {
  const char* code;  // without the byte-order character
  size_t file_size;
  DType dtype;
  Convert convert;
};
constexpr NpyDtype kDtypes[] = {
    {"u1", 1, DType::kU8, Convert::kNone},  {"b1", 1, DType::kU8, Convert::kBool},
    {"i1", 1, DType::kI32, Convert::kI8},   {"u2", 2, DType::kI32, Convert::kU16},
    {"i2", 2, DType::kI32, Convert::kI16},  {"i4", 4, DType::kI32, Convert::kNone},
    {"i8", 8, DType::kI64, Convert::kNone}, {"f4", 4, DType::kF32, Convert::kNone},
    {"f8", 8, DType::kF64, Convert::kNone},
};
// NumPy's '<U<n>': n UTF-32 code points per element, NUL-padded (file_size is per code point).
constexpr NpyDtype kUnicodeDtype = {"U", 4, DType::kStr, Convert::kUnicode};
// At most this many code points per element (a text of 1 MiB).
constexpr int64_t kMaxUnicodeChars = int64_t{1} << 20;

// Sequential reads from a file or a zip member; throws DataError on I/O faults, returns a short
// count at the end of the data.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual size_t read(void* dst, size_t n) = 0;
};

class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path) : path_(path) {
    std::string why;
    file_ = File::open_regular(path, why);
    if (!file_.is_open()) throw_data_error(path, why);
  }
  uint64_t size() const { return file_.size(); }
  size_t read(void* dst, size_t n) override {
    size_t got = 0;
    if (!file_.read_full(dst, n, got))
      throw_data_error(path_, std::string("read failed: ") + std::strerror(errno));
    return got;
  }

 private:
  const std::string& path_;
  File file_;
};

class ZipMemberSource : public ByteSource {
 public:
  ZipMemberSource(const std::string& path, const std::string& member, ZipMemberStream f)
      : path_(path), member_(member), f_(std::move(f)) {}
  size_t read(void* dst, size_t n) override {
    size_t got = 0;
    std::string why;
    if (!f_.read(dst, n, got, why))
      throw_data_error(path_, "member '" + member_ + "' cannot be read (" + why + ")");
    return got;
  }

 private:
  const std::string& path_;
  const std::string& member_;
  ZipMemberStream f_;
};

// Text of the header for error messages: printable, at most ~120 characters.
std::string quote_header(std::string_view h) {
  std::string s = printable(h, 120);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// One value of the header dict: a string, a bool, a tuple of non-negative ints, or anything else
// (a list or dict, as structured dtypes have), which is kept only as "other".
struct HeaderValue {
  enum class Kind { kString, kBool, kTuple, kOther } kind = Kind::kOther;
  std::string str;
  bool b = false;
  std::vector<int64_t> ints;
};

// A strict parser for the dict literal numpy writes. Returns false on anything unexpected.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view s) : s_(s) {}

  bool parse(std::map<std::string, HeaderValue>* out) {
    skip_ws();
    if (!eat('{')) return false;
    for (;;) {
      skip_ws();
      if (eat('}')) break;
      std::string key;
      if (!string(&key)) return false;
      skip_ws();
      if (!eat(':')) return false;
      HeaderValue v;
      if (!value(&v)) return false;
      (*out)[key] = std::move(v);
      skip_ws();
      if (eat(',')) continue;
      skip_ws();
      if (eat('}')) break;
      return false;
    }
    skip_ws();
    return i_ == s_.size();
  }

 private:
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool word(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  bool string(std::string* out) {
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) return false;
    const char q = s_[i_++];
    size_t end = s_.find(q, i_);
    if (end == std::string_view::npos) return false;
    *out = std::string(s_.substr(i_, end - i_));
    i_ = end + 1;
    return true;
  }
  bool integer(int64_t* out) {
    size_t start = i_;
    int64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (v > (kMaxElements * 1024) / 10) return false;  // far beyond any real dimension
      v = v * 10 + (s_[i_++] - '0');
    }
    if (i_ == start) return false;
    eat('L');  // Python 2 long suffix in old files
    *out = v;
    return true;
  }
  // Skips a bracketed value such as a list of fields, honouring quotes and nesting.
  bool skip_bracketed() {
    int depth = 0;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '\'' || c == '"') {
        std::string ignored;
        if (!string(&ignored)) return false;
        continue;
      }
      ++i_;
      if (c == '[' || c == '(' || c == '{') ++depth;
      if (c == ']' || c == ')' || c == '}') {
        if (--depth == 0) return true;
        if (depth < 0) return false;
      }
    }
    return false;
  }
  bool value(HeaderValue* v) {
    skip_ws();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '\'' || c == '"') {
      v->kind = HeaderValue::Kind::kString;
      return string(&v->str);
    }
    if (word("True") || word("False")) {
      v->kind = HeaderValue::Kind::kBool;
      v->b = c == 'T';
      return true;
    }
    if (c == '(') {
      // A tuple of ints, e.g. (), (3,), (2, 3); anything else inside makes it "other".
      size_t start = i_++;
      v->kind = HeaderValue::Kind::kTuple;
      for (;;) {
        skip_ws();
        if (eat(')')) return true;
        int64_t d;
        if (!integer(&d)) break;
        v->ints.push_back(d);
        skip_ws();
        if (eat(',')) continue;
        skip_ws();
        if (eat(')')) return true;
        break;
      }
      i_ = start;
      v->kind = HeaderValue::Kind::kOther;
      v->ints.clear();
      return skip_bracketed();
    }
    if (c == '[' || c == '{') return skip_bracketed();
    return false;
  }

  std::string_view s_;
  size_t i_ = 0;
};

struct NpyHeader {
  const NpyDtype* dtype = nullptr;
  Shape shape;
  int64_t elements = 1;
  uint64_t data_offset = 0;  // bytes before the first element
  size_t item = 0;           // bytes per element in the file
};

// Reads and validates the preamble and header; `fail` throws with the rule text.
template <typename Fail>
NpyHeader read_header(ByteSource& src, uint64_t total, const Fail& fail) {
  auto truncated = [&](uint64_t expected, bool at_least) {
    fail("file is truncated; expected " + std::string(at_least ? "at least " : "") +
         std::to_string(expected) + " bytes, got " + std::to_string(total));
  };
  unsigned char pre[12];
  const size_t head = src.read(pre, 8);
  const size_t magic_seen = std::min(head, kMagicLen);
  if (std::memcmp(pre, kMagic, magic_seen) != 0) {
    std::string got;
    for (size_t i = 0; i < magic_seen; ++i) got += (pre[i] >= 32 && pre[i] < 127) ? pre[i] : '?';
    fail("bad magic, not an NPY file; expected '\\x93NUMPY', got '" + got + "'");
  }
  if (total < 10 || head < 8) truncated(10, true);
  const int major = pre[6], minor = pre[7];
  uint64_t prefix = 0;
  uint32_t hlen = 0;
  if (major == 1) {
    if (src.read(pre + 8, 2) < 2) truncated(10, true);
    hlen = pre[8] | (uint32_t{pre[9]} << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (total < 12 || src.read(pre + 8, 4) < 4) truncated(12, true);
    hlen = pre[8] | (uint32_t{pre[9]} << 8) | (uint32_t{pre[10]} << 16) | (uint32_t{pre[11]} << 24);
    prefix = 12;
  } else {
    fail("unsupported NPY format version; expected 1.0, 2.0 or 3.0, got " + std::to_string(major) +
         "." + std::to_string(minor));
  }
  if (hlen > kMaxHeaderLen)
    fail("NPY header is too long; expected at most " + std::to_string(kMaxHeaderLen) +
         " bytes, got " + std::to_string(hlen));
  if (prefix + hlen > total) truncated(prefix + hlen, true);
  std::string text(hlen, '\0');
  if (src.read(text.data(), hlen) < hlen) truncated(prefix + hlen, true);

  std::map<std::string, HeaderValue> dict;
  using Kind = HeaderValue::Kind;
  if (!HeaderParser(text).parse(&dict) || !dict.count("descr") || !dict.count("fortran_order") ||
      !dict.count("shape") || dict["fortran_order"].kind != Kind::kBool ||
      dict["shape"].kind != Kind::kTuple)
    fail(
        "malformed NPY header; expected a dict with 'descr', 'fortran_order' (bool) and 'shape' "
        "(tuple of ints), got \"" +
        quote_header(text) + "\"");

  NpyHeader h;
  const HeaderValue& descr = dict["descr"];
  if (descr.kind != Kind::kString)
    fail(std::string("unsupported dtype (structured or record array); expected one of ") +
         kSupported);
  const std::string& d = descr.str;
  const char order = d.empty() ? '?' : d[0];
  const std::string code =
      (order == '<' || order == '>' || order == '|' || order == '=') ? d.substr(1) : d;
  for (const NpyDtype& t : kDtypes)
    if (code == t.code) h.dtype = &t;
  if (h.dtype) h.item = h.dtype->file_size;
  if (code.size() >= 2 && code[0] == 'U' && code.size() <= 8 &&
      code.find_first_not_of("0123456789", 1) == std::string::npos) {
    const int64_t chars = std::stoll(code.substr(1));
    if (chars < 1 || chars > kMaxUnicodeChars)
      fail("unsupported string width '" + d + "'; expected <U1 to <U" +
           std::to_string(kMaxUnicodeChars));
    h.dtype = &kUnicodeDtype;
    h.item = static_cast<size_t>(chars) * 4;
  }
  if (!h.dtype || (order == '|' && h.dtype->file_size > 1))
    fail("unsupported dtype '" + d + "'; expected one of " + kSupported);
  if (order == '>' && h.dtype->file_size > 1)
    fail("big-endian data is not supported; expected '<" + code + "', got '" + d +
         "'\nhint: save a.astype(a.dtype.newbyteorder('<')) instead");

  const std::vector<int64_t>& dims = dict["shape"].ints;
  if (dims.size() > static_cast<size_t>(Shape::kMaxRank))
    fail("unsupported rank; expected at most " + std::to_string(Shape::kMaxRank) +
         " dimensions, got " + std::to_string(dims.size()));
  if (dict["fortran_order"].b && dims.size() >= 2)
    fail(
        "Fortran-order arrays are not supported; expected fortran_order False (C order), got "
        "True\nhint: save np.ascontiguousarray(a) instead");
  for (int64_t n : dims) {
    h.shape.push_back(n);
    if (n != 0 && h.elements > kMaxElements / n)
      fail("NPY header declares too many elements; expected at most " +
           std::to_string(kMaxElements) + ", got shape " + h.shape.str() + "...");
    h.elements *= n;
  }
  h.data_offset = prefix + hlen;
  const uint64_t expected = h.data_offset + static_cast<uint64_t>(h.elements) * h.item;
  if (total < expected) truncated(expected, false);
  if (total > expected)
    fail("file is longer than its NPY header declares; expected " + std::to_string(expected) +
         " bytes, got " + std::to_string(total));
  return h;
}

template <typename From>
void widen_to_i32(const std::string& raw, int64_t n, int32_t* dst) {
  for (int64_t i = 0; i < n; ++i) {
    From v;
    std::memcpy(&v, raw.data() + i * sizeof(From), sizeof(From));
    dst[i] = v;
  }
}

// Appends code point c as UTF-8; a value beyond Unicode or a surrogate becomes U+FFFD.
void append_utf8(std::string& s, uint32_t c) {
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// A '<U<n>' array as kStr: each element's code points up to its trailing NULs, in UTF-8.
template <typename Fail>
Array read_unicode(ByteSource& src, const NpyHeader& h, const Fail& fail) {
  std::vector<std::string> values(static_cast<size_t>(h.elements));
  std::string raw(h.item, '\0');
  for (auto& v : values) {
    if (src.read(raw.data(), h.item) < h.item)
      fail("file is truncated; expected " + std::to_string(h.elements) + " strings of " +
           std::to_string(h.item / 4) + " characters");
    size_t len = h.item / 4;
    uint32_t c = 0;
    while (len > 0 && (std::memcpy(&c, raw.data() + (len - 1) * 4, 4), c == 0)) --len;
    for (size_t k = 0; k < len; ++k) {
      std::memcpy(&c, raw.data() + k * 4, 4);
      append_utf8(v, c);
    }
  }
  return Array::strings(h.shape, std::move(values));
}

// Reads one array from `src`, which holds exactly `total` bytes of .npy data.
template <typename Fail>
Array read_npy(ByteSource& src, uint64_t total, const Fail& fail) {
  const NpyHeader h = read_header(src, total, fail);
  if (h.dtype->convert == Convert::kUnicode) return read_unicode(src, h, fail);
  Array a;
  try {
    a = Array::zeros(h.dtype->dtype, h.shape);
  } catch (const std::bad_alloc&) {
    fail("out of memory; expected to hold " +
         std::to_string(dtype_size(h.dtype->dtype) * static_cast<size_t>(h.elements)) +
         " bytes for shape " + h.shape.str() + ", got an allocation failure");
  }
  const size_t file_bytes = static_cast<size_t>(h.elements) * h.item;
  auto read_all = [&](void* dst) {
    size_t got = src.read(dst, file_bytes);
    if (got < file_bytes)
      fail("file is truncated; expected " + std::to_string(h.data_offset + file_bytes) +
           " bytes, got " + std::to_string(h.data_offset + got));
  };
  switch (h.dtype->convert) {
    case Convert::kNone:
      read_all(a.mutable_data());
      break;
    case Convert::kBool: {
      read_all(a.mutable_data());
      auto* p = static_cast<uint8_t*>(a.mutable_data());
      for (int64_t i = 0; i < h.elements; ++i) p[i] = p[i] != 0;
      break;
    }
    case Convert::kI8:
    case Convert::kU16:
    case Convert::kI16: {
      std::string raw(file_bytes, '\0');
      read_all(raw.data());
      auto* dst = static_cast<int32_t*>(a.mutable_data());
      if (h.dtype->convert == Convert::kI8) widen_to_i32<int8_t>(raw, h.elements, dst);
      if (h.dtype->convert == Convert::kU16) widen_to_i32<uint16_t>(raw, h.elements, dst);
      if (h.dtype->convert == Convert::kI16) widen_to_i32<int16_t>(raw, h.elements, dst);
      break;
    }
    case Convert::kUnicode:
      break;  // read_unicode
  }
  return a;
}

ZipReader open_zip(const std::string& path) {
  // A missing or unreadable file reads like every other loader's.
  return ZipReader(path, [&](ZipReader::OpenFault fault, const std::string& why) {
    if (fault == ZipReader::OpenFault::kFile) throw_data_error(path, why);
    throw_data_error(
        path, "not a valid NPZ archive; expected a zip file, got one libzip rejects (" + why + ")");
  });
}

std::vector<std::string> keys_of(const ZipReader& z) {
  std::vector<std::string> keys;
  for (const std::string& s : z.names())
    if (s.size() > 4 && s.compare(s.size() - 4, 4, ".npy") == 0)
      keys.push_back(s.substr(0, s.size() - 4));
  return keys;
}

// Code points of a UTF-8 string (bytes that are not a sequence's continuation).
size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

size_t max_code_points(const Array& a) {
  size_t m = 0;
  for (int64_t i = 0; i < a.shape().size(); ++i) m = std::max(m, code_points(a.strings()[i]));
  return m;
}

// A kStr array's elements as '<U<width>' data: UTF-32, NUL-padded.
std::string unicode_bytes(const Array& a, size_t width) {
  std::string out;
  out.reserve(static_cast<size_t>(a.shape().size()) * width * 4);
  for (int64_t i = 0; i < a.shape().size(); ++i) {
    const std::string& s = a.strings()[i];
    size_t n = 0;
    for (size_t k = 0; k < s.size();) {
      const auto b = static_cast<unsigned char>(s[k]);
      const size_t len = b < 0x80 ? 1 : b >> 5 == 6 ? 2 : b >> 4 == 14 ? 3 : b >> 3 == 30 ? 4 : 1;
      uint32_t c = len == 1 ? b : b & (0x7F >> len);
      for (size_t j = 1; j < len && k + j < s.size(); ++j)
        c = (c << 6) | (static_cast<unsigned char>(s[k + j]) & 0x3F);
      out.append(reinterpret_cast<const char*>(&c), 4);
      k += len;
      ++n;
    }
    out.append((width - n) * 4, '\0');
  }
  return out;
}

std::string npy_header_text(const Array& a) {
  std::string descr;
  switch (a.dtype()) {
    case DType::kU8:
      descr = "|u1";
      break;
    case DType::kI32:
      descr = "<i4";
      break;
    case DType::kI64:
      descr = "<i8";
      break;
    case DType::kF32:
      descr = "<f4";
      break;
    case DType::kF64:
      descr = "<f8";
      break;
    case DType::kStr:
      descr = "<U" + std::to_string(std::max<size_t>(1, max_code_points(a)));
      break;
  }
  std::string shape = "(";
  for (int i = 0; i < a.shape().rank(); ++i) {
    if (i) shape += ", ";
    shape += std::to_string(a.shape()[i]);
  }
  if (a.shape().rank() == 1) shape += ",";
  shape += ")";
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and end with '\n' so the data starts 64-byte aligned, as numpy does.
  const size_t unpadded = kMagicLen + 4 + h.size() + 1;
  h.append((64 - unpadded % 64) % 64, ' ');
  h += '\n';
  return h;
}

}  // namespace

Array load_npy(const std::string& path) {
  FileSource src(path);
  return read_npy(src, src.size(), [&](const std::string& rule) { throw_data_error(path, rule); });
}

std::vector<std::string> npz_keys(const std::string& path) { return keys_of(open_zip(path)); }

Array load_npz(const std::string& path, const std::string& key) {
  const ZipReader z = open_zip(path);
  std::string member = key + ".npy";
  int64_t index = z.index_of(member);
  if (index < 0 && key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) {
    member = key;
    index = z.index_of(member);
  }
  if (index < 0) {
    std::string list;
    for (const std::string& k : keys_of(z)) list += (list.empty() ? "'" : ", '") + k + "'";
    throw_data_error(path, "no array named '" + key + "' in the archive; expected one of " +
                               (list.empty() ? std::string("(no .npy members)") : list) +
                               ", got '" + key + "'");
  }
  const auto i = static_cast<uint64_t>(index);
  ZipMemberInfo st;
  if (!z.stat(i, st))
    throw_data_error(path, "member '" + member + "' cannot be read (" + z.last_error() + ")");
  ZipMemberStream f = z.open_member(i);
  if (!f.is_open())
    throw_data_error(path, "member '" + member + "' cannot be read (" + z.last_error() + ")");
  ZipMemberSource src(path, member, std::move(f));
  Array a = read_npy(src, st.size, [&](const std::string& rule) {
    throw_data_error(path, "member '" + member + "': " + rule);
  });
  // Reading to the end makes libzip verify the member's CRC.
  char extra;
  if (src.read(&extra, 1) != 0)
    throw_data_error(path, "member '" + member + "' is longer than its zip entry declares");
  return a;
}

void save_npy(const std::string& path, const Array& a) {
  auto fail = [&](const std::string& why) {
    throw DataError("failed to write data file '" + path + "': " + why);
  };
  NNFLEET_CHECK(!a.empty());
  const std::string header = npy_header_text(a);
  std::string preamble(kMagic, kMagicLen);
  preamble += '\x01';
  preamble += '\x00';
  preamble += static_cast<char>(header.size() & 0xff);
  preamble += static_cast<char>(header.size() >> 8);
  preamble += header;

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  File f = File::create(tmp, 0666);
  if (!f.is_open()) fail(std::string("cannot create '") + tmp + "': " + std::strerror(errno));
  const std::string text =
      a.dtype() == DType::kStr ? unicode_bytes(a, std::max<size_t>(1, max_code_points(a))) : "";
  const bool ok = f.write_full(preamble.data(), preamble.size()) &&
                  (a.dtype() == DType::kStr ? f.write_full(text.data(), text.size())
                                            : f.write_full(a.data(), a.size_bytes())) &&
                  f.sync();
  const int e = errno;
  if (!f.close() || !ok) {
    ::unlink(tmp.c_str());
    fail(std::string("write failed: ") + std::strerror(ok ? errno : e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int re = errno;
    ::unlink(tmp.c_str());
    fail(std::string("rename failed: ") + std::strerror(re));
  }
}

}  // namespace nnfleet
