// CSV loading: columns, label typing, and each malformed-table message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data/dataset.h"
#include "test_util.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using namespace nnfleet::testing;

// Writes `text` as a CSV file in `dir` and returns the error message loading it with `label`.
std::string csv_error(const TempDir& dir, const std::string& text, const std::string& label = "y") {
  write_bytes(dir.file("t.csv"), text);
  return data_error_of([&] { load_csv(dir.file("t.csv"), label); });
}

TEST(Csv, LoadsFeaturesInColumnOrderWithoutTheLabel) {
  // table.csv: a,b,label,c / 1,2.5,0,-3 / 4,5,1,6e-1 / (blank) / 7,8,2,9
  CsvData d = load_csv(fixture("table.csv"), "label");
  EXPECT_EQ(d.feature_names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(d.x.dtype(), DType::kF32);
  EXPECT_EQ(d.x.shape(), (Shape{3, 3}));
  const std::vector<float> x = {1, 2.5f, -3, 4, 5, 0.6f, 7, 8, 9};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(d.x.at(i), static_cast<double>(x[i])) << i;
}

TEST(Csv, IntegralLabelsAreInt32) {
  CsvData d = load_csv(fixture("table.csv"), "label");
  EXPECT_EQ(d.y.dtype(), DType::kI32);
  EXPECT_EQ(d.y.shape(), (Shape{3}));
  EXPECT_EQ(d.y.at(0), 0);
  EXPECT_EQ(d.y.at(2), 2);
}

TEST(Csv, FractionalLabelsAreFloat32AndCrlfIsAccepted) {
  CsvData d = load_csv(fixture("table_float_label.csv"), "y");
  EXPECT_EQ(d.y.dtype(), DType::kF32);
  EXPECT_EQ(d.y.at(0), 1.25);
  EXPECT_EQ(d.y.at(1), -2.0);
  EXPECT_EQ(d.x.shape(), (Shape{2, 1}));
  EXPECT_EQ(d.x.at(1), 1.5);
}

TEST(Csv, LabelOutsideInt32IsFloat32) {
  TempDir dir;
  write_bytes(dir.file("t.csv"), "x,y\n1,3000000000\n");
  EXPECT_EQ(load_csv(dir.file("t.csv"), "y").y.dtype(), DType::kF32);
}

TEST(Csv, TrimsBlanksAndAcceptsQuotedHeaderNamesAndBom) {
  TempDir dir;
  write_bytes(dir.file("t.csv"), "\xEF\xBB\xBF\"p\", y \n 1 ,\t2\n+3,-4\n");
  CsvData d = load_csv(dir.file("t.csv"), "y");
  EXPECT_EQ(d.feature_names, (std::vector<std::string>{"p"}));
  EXPECT_EQ(d.x.at(1), 3);
  EXPECT_EQ(d.y.at(1), -4);
}

TEST(Csv, MissingLabelColumnListsTheColumns) {
  std::string msg = data_error_of([] { load_csv(fixture("table.csv"), "target"); });
  EXPECT_THAT(msg, HasSubstr("failed to read data file '" + fixture("table.csv") + "'"));
  EXPECT_THAT(msg, HasSubstr("no label column named 'target'; expected one of 'a', 'b', "
                             "'label', 'c', got 'target'"));
}

TEST(Csv, NonNumericCellNamesLineAndColumn) {
  TempDir dir;
  EXPECT_THAT(csv_error(dir, "a,y\n1,2\n3,x7\n"),
              HasSubstr("non-numeric cell at line 3, column 2 ('y'); expected a number, got 'x7'"));
}

TEST(Csv, LineNumbersCountBlankLines) {
  TempDir dir;
  EXPECT_THAT(csv_error(dir, "a,y\n\n1,2\n\n\nfoo,1\n"),
              HasSubstr("non-numeric cell at line 6, column 1 ('a')"));
}

TEST(Csv, EmptyCellIsNonNumeric) {
  TempDir dir;
  EXPECT_THAT(csv_error(dir, "a,y\n,2\n"), HasSubstr("line 2, column 1 ('a'); expected a number, "
                                                     "got ''"));
}

TEST(Csv, RaggedRowNamesLineAndCounts) {
  TempDir dir;
  EXPECT_THAT(csv_error(dir, "a,b,y\n1,2,3\n4,5\n"),
              HasSubstr("ragged row at line 3; expected 3 cells, got 2"));
  EXPECT_THAT(csv_error(dir, "a,b,y\n1,2,3,4\n"),
              HasSubstr("ragged row at line 2; expected 3 cells, got 4"));
}

TEST(Csv, EmptyFileIsRejected) {
  TempDir dir;
  EXPECT_THAT(csv_error(dir, ""), HasSubstr("file is empty; expected a header row, got 0 bytes"));
  EXPECT_THAT(csv_error(dir, "\n \n"),
              HasSubstr("file is empty; expected a header row, got 2 blank lines"));
}

TEST(Csv, HeaderWithoutRowsIsRejected) {
  TempDir dir;
  EXPECT_THAT(csv_error(dir, "a,y\n"),
              HasSubstr("no data rows; expected at least 1 row after the header, got 0"));
}

TEST(Csv, DuplicateLabelColumnIsRejected) {
  TempDir dir;
  EXPECT_THAT(csv_error(dir, "y,a,y\n1,2,3\n"),
              HasSubstr("label column 'y' appears more than once in the header; expected 1 "
                        "column, got columns 1 and 3"));
}

TEST(Csv, TruncatedMidRowIsARaggedRow) {
  TempDir dir;
  const std::string bytes = read_bytes(fixture("table.csv"));
  write_bytes(dir.file("cut.csv"), bytes.substr(0, bytes.size() - 5));  // ends "...\n7,8"
  std::string msg = data_error_of([&] { load_csv(dir.file("cut.csv"), "label"); });
  EXPECT_THAT(msg, HasSubstr("line 5"));
}

TEST(Csv, EveryTruncatedPrefixLoadsOrFailsCleanly) {
  TempDir dir;
  const std::string bytes = read_bytes(fixture("table.csv"));
  for_each_truncation(dir.file("cut.csv"), bytes, [&](size_t) {
    try {
      CsvData d = load_csv(dir.file("cut.csv"), "label");
      EXPECT_EQ(d.x.rows(), d.y.rows());
    } catch (const DataError&) {
    }
  });
}

// A raw NUL (or any control byte) in a bad cell reached the terminal; it is shown as \x00 now.
TEST(Csv, ControlBytesInABadCellAreEscapedInTheMessage) {
  TempDir dir;
  const std::string e = csv_error(dir, std::string("a,y\n1,0\n2\0\x1b[31m,1\n", 20));
  EXPECT_THAT(e, HasSubstr("non-numeric cell at line 3, column 1 ('a'); expected a number, got "
                           "'2\\x00\\x1b[31m'"));
  EXPECT_EQ(e.find('\0'), std::string::npos);
  EXPECT_EQ(e.find('\x1b'), std::string::npos);
}

// Text columns (issue 35): a lone feature column is text when any of its cells is quoted; a
// quote elsewhere (the label) never turns a broken number into text.
TEST(Csv, ALoneQuotedColumnIsText) {
  TempDir dir;
  write_bytes(dir.file("t.csv"), "text,y\nhello there,0\n\"a, \"\"b\"\"\",1\n");
  const CsvData d = load_csv(dir.file("t.csv"), "y");
  ASSERT_EQ(d.x.dtype(), DType::kStr);
  EXPECT_EQ(d.x.strings()[0], "hello there");
  EXPECT_EQ(d.x.strings()[1], "a, \"b\"");
}

TEST(Csv, ABadNumberInALoneColumnIsAnErrorWithoutQuotes) {
  TempDir dir;
  const std::string msg = csv_error(dir, "a,y\n1,0\n1.5x,1\n2,\"1\"\n");
  EXPECT_THAT(msg, HasSubstr("non-numeric cell at line 3, column 1 ('a'); expected a number, "
                             "got '1.5x'"));
  EXPECT_THAT(msg, HasSubstr("hint: quote the cells of a text column"));
}

TEST(Csv, QuotedNumbersAreNumbersAndBadOnesNameTheirCell) {
  TempDir dir;
  write_bytes(dir.file("t.csv"), "a,b,y\n1,\"2.5\",0\n");
  const CsvData d = load_csv(dir.file("t.csv"), "y");
  ASSERT_EQ(d.x.dtype(), DType::kF32);
  EXPECT_EQ(d.x.at(1), 2.5);
  EXPECT_THAT(csv_error(dir, "a,b,y\n1,2,0\n3,\"x\",1\n"),
              HasSubstr("non-numeric cell at line 3, column 2 ('b'); expected a number, got 'x'"));
  EXPECT_THAT(csv_error(dir, "a,y\n\"t\",0\n\"u\",z\n"),
              HasSubstr("non-numeric cell at line 3, column 2 ('y'); expected a number, got 'z'"));
  EXPECT_THAT(csv_error(dir, "a,y\n\"t,0\n"), HasSubstr("unbalanced double quote at line 2"));
}

}  // namespace
}  // namespace nnfleet
