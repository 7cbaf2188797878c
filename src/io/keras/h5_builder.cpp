// h5::Builder: HDF5 file images from a script, through libhdf5 once per structure and from a
// kept template after that (h5_builder.h says why that is safe).
#include "io/keras/h5_builder.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string_view>

namespace nnfleet::h5 {
namespace {

// Per thread: at most this many templates, and this many bytes of them in all (a bigger file
// is made by libhdf5 each time; its numbers then cost more than libhdf5's setup).
constexpr size_t kMaxTemplates = 32;
constexpr size_t kMaxTemplateBytes = size_t{4} << 20;

struct Template {
  std::string key, image;
  std::vector<uint64_t> addresses;  // one per data step, kNoAddress for an empty dataset
};

struct Cache {
  std::vector<Template> templates;  // most recently used first
  size_t bytes = 0;
};

std::atomic<size_t> by_hdf5{0}, from_template{0};

Cache& thread_cache() {
  thread_local Cache c;
  return c;
}

void put_size(std::string& key, size_t n) {
  const uint64_t v = n;
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_string(std::string& key, const std::string& s) {
  put_size(key, s.size());
  key += s;
}

// What a template holds in place of the k-th varying string of n bytes: no NUL (HDF5 takes
// variable-length strings as C strings), and unlike anything else in a file.
std::string marker(size_t n, size_t k) {
  std::string m(n, '\0');
  for (size_t i = 0; i < n; ++i) m[i] = static_cast<char>(0x80 | ((i * 151 + k * 59 + 89) & 0x7f));
  return m;
}

// Gives the whole pages of bytes [at, at + n) of `data` back to the system: numbers libhdf5's
// image holds now, never read again (their step is done). m8's 8 MB of weights and Adam state
// were held twice while its file was made, at W1's peak resident memory; a page shared with
// another step's bytes stays.
void give_back(std::string& data, size_t at, size_t n) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data.data() + at);
  const uintptr_t first = (begin + page - 1) & ~(page - 1), last = (begin + n) & ~(page - 1);
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace

Builder::Builder(std::string name, size_t expected_bytes)
    : name_(std::move(name)), expected_bytes_(expected_bytes) {
  // A big file's numbers' room taken once: grown by doubling, the string held its old and new
  // memory at each step (m8's 8 MB of numbers copied from 4 MB of them into 8 MB more).
  if (expected_bytes_ > kMaxTemplateBytes) data_.reserve(expected_bytes_);
}

Builder::Counts Builder::counts() { return {by_hdf5.load(), from_template.load()}; }

void Builder::add(Step s, const void* data, size_t bytes) {
  key_ += static_cast<char>(s.op);
  key_ += static_cast<char>(s.type);
  put_size(key_, static_cast<size_t>(s.node));
  put_string(key_, s.name);
  put_size(key_, s.dims.size());
  for (int64_t d : s.dims) put_size(key_, static_cast<size_t>(d));
  put_size(key_, s.values.size());
  for (const std::string& v : s.values) put_string(key_, v);
  put_size(key_, bytes);
  // Floats start on a float's boundary (the string's memory is 16-byte aligned), so that
  // libhdf5 reads them where they are.
  if (s.op == Op::kFloats) data_.resize((data_.size() + sizeof(float) - 1) & ~(sizeof(float) - 1));
  s.data_at = data_.size();
  s.data_bytes = bytes;
  if (bytes) data_.append(static_cast<const char*>(data), bytes);
  steps_.push_back(std::move(s));
}

int Builder::find_group(int node, const std::string& path) const {
  for (size_t a = 0; node >= 0;) {
    const size_t b = path.find('/', a);
    const auto it = children_.find({node, path.substr(a, b == std::string::npos ? b : b - a)});
    node = it == children_.end() ? -1 : it->second;
    if (b == std::string::npos) break;
    a = b + 1;
  }
  return node;
}

Builder::Node Builder::Node::create_group(const std::string& name) {
  const int id = b_->nodes_++;
  b_->children_[{id_, name}] = id;
  b_->add({Op::kGroup, StrType::kVlenUtf8, id_, name, {}, {}});
  return Node(b_, id);
}

bool Builder::Node::has_group(const std::string& path) const {
  return b_->find_group(id_, path) >= 0;
}

Builder::Node Builder::Node::group(const std::string& path) const {
  const int id = b_->find_group(id_, path);
  NNFLEET_CHECK(id >= 0);
  return Node(b_, id);
}

void Builder::Node::write_string_attr(const std::string& name, const std::string& value,
                                      StrType type) {
  b_->add({Op::kStringAttr, type, id_, name, {}, {value}});
}

void Builder::Node::write_varying_string_attr(const std::string& name, const std::string& value,
                                              StrType type) {
  b_->add({Op::kVaryingAttr, type, id_, name, {}, {}}, value.data(), value.size());
}

void Builder::Node::write_string_list_attr(const std::string& name,
                                           const std::vector<std::string>& values, StrType type) {
  b_->add({Op::kStringListAttr, type, id_, name, {}, values});
}

void Builder::Node::write_floats(const std::string& name, const std::vector<int64_t>& dims,
                                 const float* data) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  b_->add({Op::kFloats, StrType::kVlenUtf8, id_, name, dims, {}}, data, n * sizeof(float));
}

void Builder::Node::write_int64_scalar(const std::string& name, int64_t v) {
  b_->add({Op::kInt64, StrType::kVlenUtf8, id_, name, {}, {}}, &v, sizeof v);
}

std::string Builder::build_with_hdf5(bool markers, std::vector<uint64_t>* addresses,
                                     bool last_use) {
  auto lock = hdf5_lock();
  // The core driver grows its image by whole steps (File::create), so a file one byte over its
  // step takes two: m7's weights (14.43 MB; 14.40 MB of numbers and 34 KB of metadata) took
  // 28.9 MB when the caller's estimate left 24 KB for metadata. The script knows its numbers and
  // names; 2 KB more per step is over twice what libhdf5 spends on an object's header and links.
  size_t known = data_.size();
  for (const Step& s : steps_) {
    known += s.name.size() + 2048;
    for (const std::string& v : s.values) known += v.size();
  }
  File f = File::create(name_, std::max(expected_bytes_, known));
  std::deque<Group> made;
  std::vector<Group*> groups = {&f.root()};
  size_t varying = 0;
  for (const Step& s : steps_) {
    Group& g = *groups[static_cast<size_t>(s.node)];
    switch (s.op) {
      case Op::kGroup:
        made.push_back(g.create_group(s.name));
        groups.push_back(&made.back());
        break;
      case Op::kStringAttr:
        g.write_string_attr(s.name, s.values[0], s.type);
        break;
      case Op::kVaryingAttr:
        g.write_string_attr(
            s.name,
            markers ? marker(s.data_bytes, varying++) : data_.substr(s.data_at, s.data_bytes),
            s.type);
        addresses->push_back(kNoAddress);
        break;
      case Op::kStringListAttr:
        g.write_string_list_attr(s.name, s.values, s.type);
        break;
      case Op::kFloats: {
        // Read in place (add() aligned them): a copy held m7's largest kernel (4.7 MB) twice.
        const auto* v =
            s.data_bytes ? reinterpret_cast<const float*>(data_.data() + s.data_at) : nullptr;
        addresses->push_back(g.write_floats(s.name, s.dims, v));
        if (last_use) give_back(data_, s.data_at, s.data_bytes);
        break;
      }
      case Op::kInt64: {
        int64_t v = 0;
        std::memcpy(&v, data_.data() + s.data_at, sizeof v);
        addresses->push_back(g.write_int64_scalar(s.name, v));
        break;
      }
    }
  }
  // The numbers are in libhdf5's image now; their copy goes before the image is copied out.
  if (last_use) std::string().swap(data_);
  return f.close_image();
}

bool Builder::locate(const std::string& image, std::vector<uint64_t>& addresses) const {
  const std::string_view img(image);
  size_t k = 0, varying = 0;
  for (const Step& s : steps_) {
    if (!s.patched()) continue;
    uint64_t& a = addresses[k++];
    if (s.data_bytes == 0) continue;
    if (s.op == Op::kVaryingAttr) {
      const std::string m = marker(s.data_bytes, varying++);
      a = img.find(m);
      if (a == std::string_view::npos || img.find(m, a + 1) != std::string_view::npos) return false;
      continue;
    }
    if (a == kNoAddress || a > img.size() || s.data_bytes > img.size() - a ||
        std::memcmp(img.data() + a, data_.data() + s.data_at, s.data_bytes) != 0)
      return false;
  }
  return true;
}

void Builder::patch(std::string& image, const std::vector<uint64_t>& addresses) const {
  size_t k = 0;
  for (const Step& s : steps_) {
    if (!s.patched()) continue;
    const uint64_t a = addresses[k++];
    if (s.data_bytes) std::memcpy(image.data() + a, data_.data() + s.data_at, s.data_bytes);
  }
}

std::string Builder::finish() {
  Cache& c = thread_cache();
  for (size_t i = 0; i < c.templates.size(); ++i) {
    if (c.templates[i].key != key_) continue;
    std::rotate(c.templates.begin(), c.templates.begin() + static_cast<std::ptrdiff_t>(i),
                c.templates.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    const Template& t = c.templates.front();
    std::string image = t.image;
    patch(image, t.addresses);
    ++from_template;
    return image;
  }
  ++by_hdf5;
  Template t{key_, "", {}};
  // A file too big to be kept is made once, straight: making the template's image first held
  // one more image of the file (14 MB for m7's weights) while the kept file was made.
  if (data_.size() > kMaxTemplateBytes) return build_with_hdf5(false, &t.addresses, true);
  t.image = build_with_hdf5(true, &t.addresses);
  if (t.image.size() > kMaxTemplateBytes || !locate(t.image, t.addresses)) {
    t.addresses.clear();
    std::string().swap(t.image);
    return build_with_hdf5(false, &t.addresses, true);
  }
  // A kept template holds its bytes only, not libhdf5's room for them (h5::File::close_image
  // hands its memory over): 32 templates of a tiny model's 19 KB file kept 2 MB more per thread.
  t.image.shrink_to_fit();
  std::string image = t.image;
  patch(image, t.addresses);
  c.bytes += t.image.size() + t.key.size();
  c.templates.insert(c.templates.begin(), std::move(t));
  while (c.templates.size() > kMaxTemplates || c.bytes > kMaxTemplateBytes) {
    c.bytes -= c.templates.back().image.size() + c.templates.back().key.size();
    c.templates.pop_back();
  }
  return image;
}

}  // namespace nnfleet::h5
