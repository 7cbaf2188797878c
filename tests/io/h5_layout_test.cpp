// Our legacy .h5 writer against real Keras files, group by group, for the sequence layers
// (Conv1D, LSTM, GRU, Bidirectional, Embedding, TimeDistributed): each real file is read, written
// back with save_keras_h5, and both files' model_weights are compared in what Keras's legacy
// loader reads (keras/src/legacy/saving/legacy_h5_format.py): layer_names, each layer group's
// weight_names and the datasets they name (shapes, float32), and the root attributes. Our writer
// writes tf.keras 2.15's layout, so a tf.keras 2.13 file must match name for name; files of
// older Keras (2.0 to 2.2: no cell scope in recurrent weight names; tf.keras 2.9: numbered cell
// scopes) and of Keras 3's legacy writer (model-scoped names without ":0") must match layer for
// layer, weight for weight.
#include <gtest/gtest.h>

#include <map>

#include "io/keras/hdf5.h"
#include "io/keras/keras_writer.h"
#include "io_test_util.h"

namespace nnfleet {
namespace {

struct Weight {
  std::string name;  // as weight_names gives it
  std::vector<int64_t> dims;
  H5T_class_t type = H5T_NO_CLASS;
  size_t size = 0;
};

struct Layout {
  std::map<std::string, std::string> root_attrs;  // the attributes Keras reads, "" when absent
  std::vector<std::string> layer_names;
  std::map<std::string, std::vector<Weight>> weights;  // per layer, in weight_names order
};

Layout read_layout(const std::string& path) {
  Layout l;
  h5::File f = h5::File::open(path);
  const h5::Group& root = f.root();
  for (const char* a : {"backend", "keras_version", "model_config"})
    l.root_attrs[a] = root.has_attr(a) ? root.string_attr(a) : "";
  const h5::Group mw = root.group("model_weights");
  for (const char* a : {"backend", "keras_version"})
    l.root_attrs[std::string("model_weights/") + a] = mw.has_attr(a) ? mw.string_attr(a) : "";
  l.layer_names = mw.string_list_attr("layer_names");
  for (const std::string& name : l.layer_names) {
    EXPECT_TRUE(mw.has_group(name)) << path << ": layer_names names a missing group " << name;
    if (!mw.has_group(name)) continue;
    const h5::Group g = mw.group(name);
    auto& ws = l.weights[name];
    for (const std::string& w : g.string_list_attr("weight_names")) {
      EXPECT_TRUE(g.has_dataset(w)) << path << ": weight_names of " << name << " names " << w;
      if (!g.has_dataset(w)) continue;
      const h5::Dataset d = g.dataset(w);
      ws.push_back({w, d.dims(), d.type_class(), d.type_size()});
    }
  }
  return l;
}

// Keras 2.0 to 2.2 list the InputLayer of a Functional model and tf.keras does too; the legacy
// writers of tf.keras >= 2.5 and Keras 3 add an empty top_level_model_weights group, which
// layer_names does not list. Layer names are compared as they are.
void compare(const std::string& file, bool same_names, const Shape* data_shape = nullptr) {
  SCOPED_TRACE(file);
  const std::string real = test::fixture(file);
  const LoadedModel lm = load_keras_model(real, "", data_shape);
  // A folder per file: ctest runs these tests in parallel, and scratch_dir empties its folder.
  const std::string ours = test::scratch_dir("h5_layout_" + file) + "/" + file;
  KerasSaveInfo info;
  info.keras_class = lm.class_name;  // a Functional file lists its InputLayer in layer_names
  save_keras_h5(ours, *lm.model, lm.params.data(), info);
  const Layout a = read_layout(real), b = read_layout(ours);
  EXPECT_EQ(b.layer_names, a.layer_names);
  for (const auto& key : {"backend", "model_weights/backend"})
    EXPECT_EQ(b.root_attrs.at(key), a.root_attrs.at(key)) << key;
  EXPECT_FALSE(b.root_attrs.at("model_config").empty());
  EXPECT_EQ(b.root_attrs.at("keras_version"), b.root_attrs.at("model_weights/keras_version"));
  for (const std::string& layer : a.layer_names) {
    SCOPED_TRACE(layer);
    const auto& wa = a.weights.at(layer);
    const auto it = b.weights.find(layer);
    ASSERT_NE(it, b.weights.end());
    const auto& wb = it->second;
    ASSERT_EQ(wb.size(), wa.size());
    for (size_t i = 0; i < wa.size(); ++i) {
      SCOPED_TRACE(wa[i].name);
      if (same_names) {
        EXPECT_EQ(wb[i].name, wa[i].name);
      }
      // The variable's own name (kernel, recurrent_kernel, bias, embeddings) in the same place.
      auto leaf = [](std::string n) {
        n = n.substr(n.rfind('/') + 1);
        return n.substr(0, n.find(':'));
      };
      EXPECT_EQ(leaf(wb[i].name), leaf(wa[i].name));
      EXPECT_EQ(wb[i].dims, wa[i].dims);
      EXPECT_EQ(wb[i].type, H5T_FLOAT);
      EXPECT_EQ(wb[i].size, 4u);
      EXPECT_EQ(wa[i].type, H5T_FLOAT);
    }
  }
  // Read back, the file predicts bit for bit what the original does (same weights, same graph).
  const LoadedModel back = load_keras_model(ours, "", data_shape);
  EXPECT_EQ(back.params, lm.params);
}

// tf.keras 2.13: Conv1D, MaxPooling1D, Reshape, two LSTMs; the layout we write, name for name.
TEST(RealFileH5Layout, Conv1dLstmTf2131MatchesNameForName) {
  compare("synth_conv1d_maxpool_lstm_tf2131.h5", true);
}

// tf.keras 2.9 numbered each LSTM's cell scope (lstm_43/lstm_cell_43/kernel:0) where 2.13 and
// later (and our writer) write lstm_43/lstm_cell/kernel:0; Keras reads weights by position.
TEST(RealFileH5Layout, StackedLstmTf290MatchesWeightForWeight) {
  compare("furniture_lstm_stacked_relu_tf290.h5", false);
}

// Keras 2.2.4: Embedding + Bidirectional(LSTM), and Embedding + GRU (reset_after false).
// Their time axis is free (None): they are read at 100 steps, as data of that length would.
TEST(RealFileH5Layout, BidirectionalLstmKeras224MatchesWeightForWeight) {
  const Shape steps{100};
  compare("imdb_bilstm_k224.h5", false, &steps);
}

TEST(RealFileH5Layout, GruKeras224MatchesWeightForWeight) {
  const Shape steps{100};
  compare("imdb_gru_k224.h5", false, &steps);
}

// Keras 2.0.4 Functional: InputLayer, GRU, TimeDistributed(Dense).
TEST(RealFileH5Layout, GruTimeDistributedKeras204MatchesWeightForWeight) {
  compare("en_fr_gru_timedist_k204.h5", false);
}

// Keras 3.6's legacy writer: Conv1D, GlobalAveragePooling1D, Dropout, Dense.
TEST(RealFileH5Layout, Conv1dKeras360MatchesWeightForWeight) {
  compare("co_sensor_conv1d_gap_k360.h5", false);
}

}  // namespace
}  // namespace nnfleet
