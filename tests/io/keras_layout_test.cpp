// Where Keras files keep each kind's weights (io/keras/keras_layout.h): flat for most kinds, in
// the cell for recurrent layers, and per half, under the half's name, inside Bidirectional.
#include "io/keras/keras_layout.h"

#include <gtest/gtest.h>

#include "layers/registry.h"

namespace nnfleet {
namespace {

std::vector<KerasWeightPlace> places_of(const char* cls, const Json& config, const Shape& in) {
  const auto l = make_layer(cls, config, ConfigMode::kKeras, "layer_1");
  return keras_weight_places(*l, l->param_specs({in}));
}

void expect_place(const KerasWeightPlace& p, const char* group, int index, const char* legacy) {
  EXPECT_EQ(p.group, group);
  EXPECT_EQ(p.index, index);
  EXPECT_EQ(p.legacy_name, legacy);
}

TEST(KerasLayout, DenseKeepsItsWeightsFlatUnderTheirOwnNames) {
  const auto p = places_of("Dense", {{"units", 3}}, Shape{2});
  ASSERT_EQ(p.size(), 2u);
  expect_place(p[0], "", 0, "kernel");
  expect_place(p[1], "", 1, "bias");
}

TEST(KerasLayout, RecurrentLayerKeepsItsWeightsInItsCell) {
  const auto p = places_of("GRU", {{"units", 2}}, Shape{3, 2});
  ASSERT_EQ(p.size(), 3u);
  expect_place(p[0], "cell", 0, "gru_cell/kernel");
  expect_place(p[2], "cell", 2, "gru_cell/bias");
}

TEST(KerasLayout, BidirectionalNestsEachHalfUnderItsName) {
  const Json fwd = {{"class_name", "LSTM"},
                    {"config", {{"units", 2}, {"use_bias", false}, {"name", "enc"}}}};
  const auto p = places_of("Bidirectional", {{"layer", fwd}}, Shape{3, 2});
  ASSERT_EQ(p.size(), 4u);
  expect_place(p[1], "forward_layer/cell", 1, "forward_enc/lstm_cell/recurrent_kernel");
  expect_place(p[2], "backward_layer/cell", 0, "backward_enc/lstm_cell/kernel");
  // A given backward_layer keeps its own class and name.
  const Json back = {{"class_name", "SimpleRNN"},
                     {"config", {{"units", 2}, {"go_backwards", true}, {"name", "back"}}}};
  const auto q =
      places_of("Bidirectional", {{"layer", fwd}, {"backward_layer", back}}, Shape{3, 2});
  ASSERT_EQ(q.size(), 5u);
  expect_place(q[4], "backward_layer/cell", 2, "back/simple_rnn_cell/bias");
}

}  // namespace
}  // namespace nnfleet
