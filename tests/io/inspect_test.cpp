// `nnfleet inspect` on a file whose input leaves the time axis free (None): the table shows None
// where a size depends on it, the parameters where they do not, and says the FLOPs depend on it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io/model_summary.h"
#include "io_test_util.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;

// Keras 2.2.4: Embedding(5000, 32) with batch_input_shape [null, null], GRU(32), Dense(1).
TEST(RealFileInspect, FreeTimeAxisShowsAsNone) {
  const std::string path = test::fixture("imdb_gru_k224.h5");
  // Without data the free axis has no size, so loading alone refuses...
  EXPECT_THROW(load_keras_model(path, ""), Error);
  // ...and inspect describes the model anyway.
  const std::string s = describe_model_file(path);
  EXPECT_THAT(s, HasSubstr("(None, None)"));
  EXPECT_THAT(s, HasSubstr("(None, None, 32)"));  // the Embedding's output
  EXPECT_THAT(s, HasSubstr("(None, 32)"));        // the GRU's last state
  EXPECT_THAT(s, HasSubstr("Total params: 166,273"));
  EXPECT_THAT(s, HasSubstr("Forward FLOPs per sample: depend on the free (None) dimensions"));
  EXPECT_THAT(s, HasSubstr("Free (None) input dimensions take their size from the data"));
}

// A file with fixed shapes gets a FLOP count and no None beyond the batch axis.
TEST(RealFileInspect, FixedShapesGiveFlops) {
  const std::string s = describe_model_file(test::fixture("imdb_embed_flatten_k224.h5"));
  EXPECT_THAT(s, HasSubstr("Forward FLOPs per sample: "));
  EXPECT_THAT(s, ::testing::Not(HasSubstr("depend on the free")));
  EXPECT_THAT(s, ::testing::Not(HasSubstr("None, None")));
}

}  // namespace
}  // namespace nnfleet
