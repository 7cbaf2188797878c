// Hostile and out-of-range plans (issue 10, items 4, 5 and 10): self-referencing YAML aliases,
// alias bombs, deep nesting, 64-bit and non-finite integers, and where a YAML syntax error is
// reported. Every file is generated here; each ends in a PlanError naming the file, the line and
// the limit (src/core/limits.h), never a crash, a hang or a silently truncated value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/limits.h"
#include "plan/plan.h"
#include "plan/plan_yaml.h"
#include "plan/yaml_emitter.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class PlanLimits : public ::testing::Test {
 protected:
  PlanLimits() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("nnfleet_plan_limits_" + std::to_string(::getpid()) + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~PlanLimits() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& text) const {
    const std::string path = (dir_ / "p.yaml").string();
    std::ofstream(path) << text;
    return path;
  }
  // The PlanError of loading `text`, or "" with a failure.
  std::string error_of(const std::string& text) const {
    const std::string path = write(text);
    try {
      load_plan(path);
    } catch (const PlanError& e) {
      return e.what();
    }
    ADD_FAILURE() << "load_plan did not throw for:\n" << text.substr(0, 300);
    return "";
  }
  std::string path() const { return (dir_ / "p.yaml").string(); }

 private:
  std::filesystem::path dir_;
};

const std::string kData = "data:\n  train: fashion-mnist:train\n";

// One model whose second layer is `layer` (a flow mapping such as "Dense: {units: 3}").
std::string with_layer(const std::string& layer) {
  return kData +
         "models:\n  - name: m\n    layers:\n      - Reshape: {target_shape: [28, 28, 1]}\n" +
         "      - " + layer + "\n      - Flatten\n      - Dense: {units: 10}\n";
}

// ---- Item 4: aliases and nesting ----

// ---- Plan size ----

// Two entries of 60,000 models each pass the per-entry limit but not the plan's: refused before
// either is expanded (which would take seconds and hundreds of MB).
TEST_F(PlanLimits, PlanOfMoreModelsThanTheLimitIsRefusedBeforeExpanding) {
  std::string a, b;
  for (int i = 0; i < 300; ++i) a += (i ? ", " : "") + std::to_string(i);
  for (int i = 0; i < 200; ++i) b += (i ? ", " : "") + std::to_string(i);
  std::string entry = "  - name: m{a}-{b}-X\n    grid: {a: [" + a + "], b: [" + b + "]}\n" +
                      "    layers: [Flatten, {Dense: {units: 10}}]\n";
  std::string second = entry;
  second.replace(second.find("-X"), 2, "-Y");
  entry.replace(entry.find("-X"), 2, "");
  const std::string err = error_of(kData + "models:\n" + entry + second);
  EXPECT_THAT(err, HasSubstr(": models: plan too large; expected at most 100000 models from all "
                             "entries and their grids together, got more"));
  EXPECT_THAT(err, HasSubstr("hint: split the fleet into several plans"));
}

TEST_F(PlanLimits, SelfReferencingAliasIsRefusedNotACrash) {
  const std::string msg = error_of("seed: &s [*s]\n" + kData);
  EXPECT_THAT(msg, HasSubstr(path() + ":1: seed[0]: a YAML alias refers to a collection that "
                                      "contains it"));
}

TEST_F(PlanLimits, AliasCycleThroughAMappingIsRefused) {
  const std::string msg = error_of(kData + "defaults: &d\n  keras: {inner: *d}\n");
  EXPECT_THAT(msg, HasSubstr("defaults.keras.inner: a YAML alias refers to a collection"));
}

TEST_F(PlanLimits, AliasBombStopsAtTheValueLimit) {
  // "Billion laughs": nine levels of ten aliases each expand to 10^9 values.
  const char* const levels[] = {"l0: &l0 [x, x, x, x, x, x, x, x, x, x]",
                                "l1: &l1 [*l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0]",
                                "l2: &l2 [*l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1]",
                                "l3: &l3 [*l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2]",
                                "l4: &l4 [*l3, *l3, *l3, *l3, *l3, *l3, *l3, *l3, *l3, *l3]",
                                "l5: &l5 [*l4, *l4, *l4, *l4, *l4, *l4, *l4, *l4, *l4, *l4]",
                                "l6: &l6 [*l5, *l5, *l5, *l5, *l5, *l5, *l5, *l5, *l5, *l5]",
                                "l7: &l7 [*l6, *l6, *l6, *l6, *l6, *l6, *l6, *l6, *l6, *l6]",
                                "l8: &l8 [*l7, *l7, *l7, *l7, *l7, *l7, *l7, *l7, *l7, *l7]",
                                "l9: &l9 [*l8, *l8, *l8, *l8, *l8, *l8, *l8, *l8, *l8, *l8]"};
  std::string text;
  for (const char* l : levels) text.append(l).append("\n");
  const std::string msg = error_of(text);
  EXPECT_THAT(msg, HasSubstr("the plan holds more than " + std::to_string(limits::kMaxPlanValues) +
                             " values"));
  EXPECT_THAT(msg, HasSubstr("each use of a YAML alias counts"));
}

TEST_F(PlanLimits, AliasBombOfLongStringsStopsAtTheTextLimit) {
  // Few values, but each alias use repeats 1 MB of text.
  std::string text = "s: &s \"" + std::string(1 << 20, 'a') + "\"\nl: [*s";
  for (int j = 1; j < 200; ++j) text += ", *s";
  text += "]\n";
  const std::string msg = error_of(text);
  EXPECT_THAT(msg, HasSubstr("the plan holds more than " +
                             std::to_string(limits::kMaxPlanTextBytes) + " bytes of text"));
}

TEST_F(PlanLimits, DeepNestingIsRefusedAtTheLimit) {
  const int d = limits::kMaxNestingDepth;
  const std::string ok =
      std::string(static_cast<size_t>(d - 1), '[') + std::string(static_cast<size_t>(d - 1), ']');
  // One level for the top mapping plus d - 1 lists: exactly the limit, so only the seed's type
  // is wrong.
  EXPECT_THAT(error_of("seed: " + ok + "\n" + kData), HasSubstr("seed: expected a non-negative"));
  const std::string deep = "[" + ok + "]";
  EXPECT_THAT(error_of("seed: " + deep + "\n" + kData),
              HasSubstr("nested more than " + std::to_string(d) + " levels deep"));
}

TEST_F(PlanLimits, VeryDeepNestingIsRefusedNotACrash) {
  for (const char* open : {"[", "{a: "}) {
    std::string text = "seed: ";
    for (int i = 0; i < 300000; ++i) text += open;
    const std::string msg = error_of(text + "\n");
    EXPECT_THAT(msg, HasSubstr("invalid YAML: nested too deeply")) << open;
    EXPECT_THAT(msg, HasSubstr(std::to_string(limits::kMaxNestingDepth))) << open;
  }
}

// ---- Item 5: integers ----

TEST_F(PlanLimits, LayerIntegersBeyond32BitsAreRefusedNotTruncated) {
  const std::string at_most = "at most " + std::to_string(limits::kMaxConfigInt);
  EXPECT_THAT(error_of(with_layer("Conv2D: {filters: 2, kernel_size: 4294967299}")),
              HasSubstr("models[0].layers[1].Conv2D.kernel_size: expected a positive integer or "
                        "a list of 2 of them (each " +
                        at_most + "), got 4294967299"));
  EXPECT_THAT(error_of(with_layer("Conv2D: {filters: 2, kernel_size: 3, strides: 4294967297}")),
              HasSubstr("Conv2D.strides: expected a positive integer or a list of 2 of them"));
  EXPECT_THAT(error_of(with_layer("Conv2D: {filters: 2, kernel_size: [3, 4294967299]}")),
              HasSubstr("Conv2D.kernel_size: expected"));
  EXPECT_THAT(
      error_of(with_layer("Dense: {units: 2147483648}")),
      HasSubstr("Dense.units: expected a positive integer " + at_most + ", got 2147483648"));
  EXPECT_THAT(error_of(with_layer("Dense: {units: 18446744073709551615}")),
              HasSubstr("Dense.units: expected a positive integer " + at_most));
  EXPECT_THAT(error_of(with_layer("Dense: {units: -9223372036854775808}")),
              HasSubstr("Dense.units: expected a positive integer, got"));
}

TEST_F(PlanLimits, HugeAndNonFiniteFloatsAreRefusedAsIntegers) {
  EXPECT_THAT(error_of(with_layer("Dense: {units: 1e300}")),
              HasSubstr("Dense.units: expected a positive integer at most"));
  EXPECT_THAT(error_of(with_layer("Conv2D: {filters: 2, kernel_size: 1e300}")),
              HasSubstr("Conv2D.kernel_size: expected"));
  EXPECT_THAT(error_of(with_layer("Conv2D: {filters: 2, kernel_size: [3, -1e300]}")),
              HasSubstr("Conv2D.kernel_size: expected"));
  EXPECT_THAT(error_of(with_layer("Dense: {units: .inf}")), HasSubstr("Dense.units: expected"));
  EXPECT_THAT(error_of(with_layer("Dense: {units: \"nan\"}")), HasSubstr("Dense.units: expected"));
}

TEST_F(PlanLimits, LargestLayerIntegerIsAccepted) {
  // The limit itself is a valid config value (the model may still be too large to build later).
  const std::string text = with_layer("Dense: {units: 2147483647}");
  const std::string path = write(text);
  const Plan p = load_plan(path);
  EXPECT_EQ(p.models[0].layers[1].config["units"], 2147483647);
}

TEST_F(PlanLimits, PlanIntegersBeyond32BitsAreRefused) {
  const std::string m = "models:\n  - name: m\n    layers: [Flatten, Dense: {units: 10}]\n";
  EXPECT_THAT(error_of(kData + m + "    epochs: 4294967297\n"),
              HasSubstr("models[0].epochs: expected a positive integer at most 2147483647, got "
                        "4294967297"));
  EXPECT_THAT(error_of(kData + m + "    batch_size: 1e300\n"),
              HasSubstr("models[0].batch_size: expected a positive integer at most"));
  EXPECT_THAT(error_of(kData + m + "    early_stopping: {patience: 18446744073709551615}\n"),
              HasSubstr("early_stopping.patience: expected a non-negative integer at most"));
}

// ---- Item 10: where a syntax error is reported ----

TEST_F(PlanLimits, UnclosedBracketIsReportedWhereItOpens) {
  const std::string msg = error_of(kData +
                                   "models:\n"                                  // line 3
                                   "  - name: a\n"                              // line 4
                                   "    layers: [Flatten, Dense: {units: 3}\n"  // line 5
                                   "  - name: b\n"                              // line 6
                                   "    layers: [Dense: {units: 3}]\n");        // line 7
  EXPECT_THAT(msg, HasSubstr(path() + ":5: invalid YAML: the '[' at column 13 is never closed; "
                                      "expected a matching ']' before line 6"));
  EXPECT_THAT(msg, Not(HasSubstr(path() + ":6:")));
}

TEST_F(PlanLimits, UnclosedBraceIsReportedWhereItOpens) {
  EXPECT_THAT(error_of(kData + "models:\n  - {name: a, layers: [Flatten]\n  - name: b\n"),
              HasSubstr(path() + ":4: invalid YAML: the '{' at column 5 is never closed"));
}

TEST_F(PlanLimits, BracketsInsidePlainScalarsAndCommentsAreNotConstructs) {
  // The error here is the tab; neither a[1] nor the comment's '[' is an open bracket.
  const std::string msg = error_of(kData + "models:  # [not a list\n  - name: a[1]\n\t- x\n");
  EXPECT_THAT(msg, HasSubstr("invalid YAML"));
  EXPECT_THAT(msg, Not(HasSubstr("never closed")));
}

// ---- Found by fuzz/fuzz_plan ----

TEST_F(PlanLimits, BytesThatAreNotUtf8AreRefusedWithTheirLineAndColumn) {
  // A layer name with byte 0x9a made the error message's JSON dump throw type_error 316, which
  // escaped load_plan.
  const std::string msg =
      error_of(kData + "models:\n  - name: m\n    layers: [Dense: {units: 3, name: \"a\x9a\"}]\n");
  EXPECT_THAT(msg,
              HasSubstr(path() + ":5: invalid text: byte 0x9a at column 40 is not UTF-8; expected "
                                 "a UTF-8"));
}

TEST_F(PlanLimits, ControlCharactersAreRefusedWithTheirLineAndColumn) {
  // A raw NUL inside an optimizer key ("learning\0_rate") reached yaml-cpp, which read the key
  // back with byte 0xA0 in its place; the expanded model's JSON dump then threw type_error 316
  // out of load_plan (fuzz/fuzz_plan, CI run of 2026-12-02).
  const std::string nul = std::string("learning") + '\0' + "_rate";
  const std::string msg = error_of(kData +
                                   "models:\n"
                                   "  - name: m\n"
                                   "    optimizer: {Adam: {" +
                                   nul +
                                   ": 0.1}}\n"  // line 5
                                   "    layers: [Dense: {units: 3}]\n");
  EXPECT_THAT(msg, HasSubstr(path() + ":5: invalid text: byte 0x00 at column 32 is a control "
                                      "character, which YAML does not allow"));
  // DEL and a C1 control (U+0081, UTF-8 C2 81) likewise; the escape form in quotes is kept.
  EXPECT_THAT(error_of(kData + "models:\n  - name: \"a\x7f\"\n"),
              HasSubstr(path() + ":4: invalid text: byte 0x7f at column 13"));
  EXPECT_THAT(error_of(kData + "models:\n  - name: a\xc2\x81\n"),
              HasSubstr(path() + ":4: invalid text: byte 0xc2 at column 12"));
  EXPECT_THAT(error_of(kData + "models:\n  - name: \"a\\x01\"\n"), Not(HasSubstr("invalid text")));
}

TEST(YamlText, FirstUnprintableCharacterIsFound) {
  using plan_detail::yaml_unprintable_at;
  const size_t ok = std::string::npos;
  EXPECT_EQ(yaml_unprintable_at("tab\tlf\ncr\r\n"), ok);
  EXPECT_EQ(yaml_unprintable_at("caf\xc3\xa9 nel \xc2\x85 nbsp \xc2\xa0"), ok);
  EXPECT_EQ(yaml_unprintable_at(std::string("ab\0", 3)), 2u);
  EXPECT_EQ(yaml_unprintable_at("\x1b[0m"), 0u);
  EXPECT_EQ(yaml_unprintable_at("x\x7f"), 1u);
  EXPECT_EQ(yaml_unprintable_at("xy\xc2\x9f"), 2u);
}

TEST(Utf8, FirstInvalidByteIsFound) {
  using plan_detail::invalid_utf8_at;
  const size_t ok = std::string::npos;
  EXPECT_EQ(invalid_utf8_at("plain ascii"), ok);
  EXPECT_EQ(invalid_utf8_at("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), ok);  // é € 😀
  EXPECT_EQ(invalid_utf8_at("ab\x9a"), 2u);            // a lone continuation
  EXPECT_EQ(invalid_utf8_at("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(invalid_utf8_at("x\xed\xa0\x80"), 1u);     // a surrogate
  EXPECT_EQ(invalid_utf8_at("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(invalid_utf8_at("abc\xe2\x82"), 3u);       // cut short
}

}  // namespace
}  // namespace nnfleet
