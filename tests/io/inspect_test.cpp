// `nnfleet inspect` on a file whose input leaves the time axis free (None): the table shows None
// where a size depends on it, the parameters where they do not, and says the FLOPs depend on it.
// Names with terminal escapes and NUL bytes (issue 31, item 11) print escaped and whole.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "commands.h"
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

TEST(TerminalSafe, EscapesControlsAndBadBytesAndKeepsPrintableUtf8) {
  using namespace std::string_literals;
  EXPECT_EQ(terminal_safe("\x1b[2J\x1b]0;title\x07"s), "\\x1b[2J\\x1b]0;title\\x07");
  EXPECT_EQ(terminal_safe("a\0b\n\t\r\x7f"s), "a\\0b\\n\\t\\r\\x7f");
  EXPECT_EQ(terminal_safe("line\n\tnext\r"s, true), "line\n\tnext\\r");
  EXPECT_EQ(terminal_safe("csi \xc2\x9b"
                          "2J nel \xc2\x85"s),
            "csi \\u009b2J nel \\u0085");
  EXPECT_EQ(terminal_safe("bad \xff \xc3 \xe2\x82 \xed\xa0\x80 \xc0\xaf"s),
            "bad \\xff \\xc3 \\xe2\\x82 \\xed\\xa0\\x80 \\xc0\\xaf");
  const std::string text = "caf\xc3\xa9 \xe2\x80\xae \xf0\x9f\x99\x82 a\\b \xc2\xa0";
  EXPECT_EQ(terminal_safe(text), text);
}

// The text `nnfleet inspect FILE` writes to stdout.
std::string inspect_output(const std::string& path) {
  CLI::App app;
  cli::Run run;
  cli::add_inspect_command(app, run);
  std::vector<const char*> argv = {"nnfleet", "inspect", path.c_str()};
  app.parse(static_cast<int>(argv.size()), argv.data());
  ::testing::internal::CaptureStdout();
  const int rc = run();
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  return out;
}

TEST(Inspect, LayerNamesWithTerminalEscapesAndNulPrintEscapedAndWhole) {
  const std::string dir = test::scratch_dir("inspect_escapes");
  // Model and layer names that clear the screen, set the window title, hold a NUL and a C1 CSI.
  const std::string json =
      R"({"class_name": "Functional", "config": {"name": "m\u001b]0;pwned\u0007",
    "layers": [
      {"class_name": "InputLayer", "name": "in\u001b[2J", "config": {"name": "in\u001b[2J",
       "batch_shape": [null, 4]}, "inbound_nodes": []},
      {"class_name": "Dense", "name": "a\u0000hidden", "config": {"name": "a\u0000hidden",
       "units": 3}, "inbound_nodes": [[["in\u001b[2J", 0, 0, {}]]]},
      {"class_name": "Dense", "name": "after\u009b", "config": {"name": "after\u009b",
       "units": 2}, "inbound_nodes": [[["a\u0000hidden", 0, 0, {}]]]}],
    "input_layers": [["in\u001b[2J", 0, 0]], "output_layers": [["after\u009b", 0, 0]]}})";
  const std::string path = dir + "/escapes.json";
  test::write_text(path, json);
  const std::string out = inspect_output(path);
  for (char c : out)
    EXPECT_TRUE(c == '\n' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f))
        << "raw control byte " << static_cast<int>(static_cast<unsigned char>(c)) << " in:\n"
        << out;
  EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos);
  EXPECT_THAT(out, HasSubstr("Model: \"m\\x1b]0;pwned\\x07\" (Functional)"));
  EXPECT_THAT(out, HasSubstr("in\\x1b[2J (InputLayer)"));
  EXPECT_THAT(out, HasSubstr("a\\0hidden (Dense)"));
  EXPECT_THAT(out, HasSubstr("after\\u009b (Dense)"));
  EXPECT_THAT(out, HasSubstr("Total params: 23"));  // printed past the NUL, to the end
  EXPECT_THAT(out, HasSubstr("Training config: none"));
}

}  // namespace
}  // namespace nnfleet
