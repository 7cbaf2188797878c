// h5::Builder: a file made from a template is byte for byte the file libhdf5 makes from the same
// script, and reads back with its own numbers and name; anything but numbers and varying
// strings makes a new structure. libhdf5 runs once per structure per thread, which is what keeps
// a fleet of small models cheap to write (one HDF5 file set-up per architecture, not per model).
#include "io/keras/h5_builder.h"

#include <gtest/gtest.h>

#include <thread>

namespace nnfleet {
namespace {

struct Numbers {
  std::string name = "model-a";
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  float lr = 0.5f;
  int64_t step = 7;
  std::string layer = "dense";
};

// A small Keras-like weights file.
std::string build(const Numbers& n) {
  h5::Builder b("test.h5", 4096);
  h5::Builder::Node root = b.root();
  root.create_group("vars").write_varying_string_attr("name", n.name, h5::StrType::kVlenUtf8);
  h5::Builder::Node layer = root.create_group("layers").create_group(n.layer);
  layer.create_group("vars").write_string_attr("name", n.layer, h5::StrType::kVlenUtf8);
  const std::string vars = std::string("layers/").append(n.layer).append("/vars");
  EXPECT_TRUE(root.has_group(vars));
  EXPECT_FALSE(root.has_group("layers/none"));
  root.group(vars).write_floats("0", {2, 3}, n.w.data());
  root.group("layers").write_floats("empty", {0}, nullptr);
  h5::Builder::Node opt = root.create_group("optimizer");
  opt.write_int64_scalar("0", n.step);
  opt.write_floats("1", {}, &n.lr);
  opt.write_string_list_attr("names", {"a", "bc"}, h5::StrType::kFixedAscii);
  return b.finish();
}

// Files made by libhdf5 and from templates since `before`.
h5::Builder::Counts since(const h5::Builder::Counts& before) {
  const h5::Builder::Counts now = h5::Builder::counts();
  return {now.by_hdf5 - before.by_hdf5, now.from_template - before.from_template};
}

// Built on a new thread: its templates are empty, so libhdf5 makes the file.
std::string build_fresh(const Numbers& n, h5::Builder::Counts* counts = nullptr) {
  std::string out;
  const h5::Builder::Counts before = h5::Builder::counts();
  std::thread t([&] { out = build(n); });
  t.join();
  if (counts) *counts = since(before);
  return out;
}

TEST(H5Builder, AFileFromATemplateIsTheFileLibhdf5Makes) {
  std::thread t([] {
    const Numbers a;
    Numbers b;
    b.name = "model-b";  // same length
    b.w = {-1, 0.25f, 1e30f, -0.0f, 7, 8};
    b.lr = 1e-3f;
    b.step = 123456789012;
    const h5::Builder::Counts before = h5::Builder::counts();
    const std::string first = build(a), second = build(b);
    EXPECT_EQ(since(before).by_hdf5, 1u);
    EXPECT_EQ(since(before).from_template, 1u);
    h5::Builder::Counts fresh_counts;
    EXPECT_EQ(second, build_fresh(b, &fresh_counts));
    EXPECT_EQ(fresh_counts.by_hdf5, 1u);
    EXPECT_EQ(first, build_fresh(a));
    EXPECT_NE(first, second);

    // (An in-memory file is open here: nothing else may make one meanwhile, as hdf5.h says.)
    h5::File f = h5::File::open_image("second.h5", second);
    EXPECT_EQ(f.root().group("vars").string_attr("name"), "model-b");
    std::vector<float> w(6);
    f.root().dataset("layers/dense/vars/0").read_floats(w.data(), w.size());
    EXPECT_EQ(w, b.w);
    EXPECT_EQ(f.root().dataset("optimizer/0").read_int64(), b.step);
    float lr = 0;
    f.root().dataset("optimizer/1").read_floats(&lr, 1);
    EXPECT_EQ(lr, b.lr);
  });
  t.join();
}

TEST(H5Builder, AnythingButNumbersAndVaryingStringsIsANewStructure) {
  std::thread t([] {
    const h5::Builder::Counts before = h5::Builder::counts();
    Numbers n;
    build(n);
    n.layer = "dense_1";  // a group name and a fixed attribute
    const std::string other_layer = build(n);
    n.name = "a-longer-name";  // a varying string of another length
    const std::string longer = build(n);
    EXPECT_EQ(since(before).by_hdf5, 3u);
    EXPECT_EQ(since(before).from_template, 0u);
    EXPECT_EQ(longer, build_fresh(n));
    {
      h5::File f = h5::File::open_image("longer.h5", longer);
      EXPECT_EQ(f.root().group("vars").string_attr("name"), "a-longer-name");
      EXPECT_TRUE(f.root().has_dataset("layers/dense_1/vars/0"));
    }
    // Every structure is kept: the first again comes from its template.
    n = Numbers{};
    n.w[0] = 42;
    const h5::Builder::Counts again = h5::Builder::counts();
    const std::string kept = build(n);
    EXPECT_EQ(since(again).from_template, 1u);
    EXPECT_EQ(kept, build_fresh(n));
  });
  t.join();
}

// A varying string is found again in the template by its marker, which must occur exactly once;
// a one-byte name is still written right, whether its template could be kept or not.
TEST(H5Builder, AOneByteVaryingStringIsWrittenRight) {
  std::thread t([] {
    Numbers n;
    n.name = std::string(1, 'm');
    build(n);
    n.name = std::string(1, 'k');
    const std::string k = build(n);
    EXPECT_EQ(h5::File::open_image("k.h5", k).root().group("vars").string_attr("name"), "k");
    EXPECT_EQ(k, build_fresh(n));
  });
  t.join();
}

// A created file's image is the core driver's own memory, handed over at close_image() instead
// of copied out: the same bytes as H5Fget_file_image's copy (close_image_copy, the way it was
// taken before), for a file within its expected size and for one that outgrows it (the driver
// then resizes the owned memory, contents kept).
std::string small_file(size_t expected, size_t floats, bool copy) {
  h5::File f = h5::File::create("owned.h5", expected);
  std::vector<float> w(floats);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.25f - 3.0f;
  h5::Group g = f.root().create_group("layers");
  g.write_string_attr("name", "dense", h5::StrType::kVlenUtf8);
  g.write_floats("0", {static_cast<int64_t>(floats)}, w.data());
  g.write_floats("1", {}, w.data());
  g.write_int64_scalar("2", 123456789);
  g.create_group("vars").write_string_list_attr("names", {"a", "bc"}, h5::StrType::kFixedAscii);
  return copy ? f.close_image_copy() : f.close_image();
}

TEST(H5File, TheOwnedImageIsTheCopiedImage) {
  for (const size_t expected : {size_t{0}, size_t{4096}, size_t{1} << 20}) {
    for (const size_t floats : {size_t{1}, size_t{1000}, size_t{300000}}) {
      const std::string owned = small_file(expected, floats, false);
      EXPECT_EQ(owned, small_file(expected, floats, true)) << expected << " " << floats;
      EXPECT_GT(owned.size(), floats * sizeof(float));
      std::vector<float> w(floats);
      h5::File::open_image("owned.h5", owned)
          .root()
          .dataset("layers/0")
          .read_floats(w.data(), floats);
      EXPECT_EQ(w.back(), static_cast<float>(floats - 1) * 0.25f - 3.0f);
    }
  }
}

// A file too big for a template (over 4 MB of numbers) is made straight, its numbers read by
// libhdf5 where the Builder keeps them (at unaligned script positions too: a varying string of
// odd length comes first): the same bytes as the script run through h5::File by hand.
TEST(H5Builder, ABigFileIsTheFileMadeByHand) {
  std::thread t([] {
    const std::string name = "odd";
    std::vector<float> w(1300000), v(3);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 977) - 0.5f;
    for (size_t i = 0; i < v.size(); ++i) v[i] = 1.5f * static_cast<float>(i);
    h5::Builder b("big.h5", 4 * (w.size() + v.size()));
    h5::Builder::Node root = b.root();
    root.create_group("vars").write_varying_string_attr("name", name, h5::StrType::kVlenUtf8);
    h5::Builder::Node layer = root.create_group("layers");
    layer.write_floats("0", {1300, 1000}, w.data());
    layer.write_floats("1", {3}, v.data());
    const std::string built = b.finish();

    h5::File f = h5::File::create("big.h5", 4 * (w.size() + v.size()));
    f.root().create_group("vars").write_string_attr("name", name, h5::StrType::kVlenUtf8);
    h5::Group g = f.root().create_group("layers");
    g.write_floats("0", {1300, 1000}, w.data());
    g.write_floats("1", {3}, v.data());
    EXPECT_EQ(built, f.close_image_copy());
  });
  t.join();
}

}  // namespace
}  // namespace nnfleet
