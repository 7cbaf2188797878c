// File: whole reads and writes through an owned descriptor, and the reasons open_regular gives.
#include "platform/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace nnfleet {
namespace {

std::string scratch(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("nnfleet_file_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(File, WritesThenReadsWholeAndFromAnOffset) {
  const std::string path = scratch("bytes");
  {
    File f = File::create(path, 0644);
    ASSERT_TRUE(f.is_open());
    ASSERT_TRUE(f.write_full("0123456789", 10));
    ASSERT_TRUE(f.close());
  }
  std::string why;
  File f = File::open_regular(path, why);
  ASSERT_TRUE(f.is_open()) << why;
  EXPECT_EQ(f.size(), 10u);
  char buf[16] = {};
  size_t got = 0;
  ASSERT_TRUE(f.pread_full(buf, 4, 6, got));
  EXPECT_EQ(std::string(buf, got), "6789");
  ASSERT_TRUE(f.read_full(buf, sizeof buf, got));  // stops at the end
  EXPECT_EQ(std::string(buf, got), "0123456789");
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

TEST(File, OpenRegularRefusesFoldersAndFifosWithoutBlocking) {
  const std::string dir = scratch("");
  std::string why;
  EXPECT_FALSE(File::open_regular(dir, why).is_open());
  EXPECT_EQ(why, "is a directory; expected a regular file");
  const std::string fifo = scratch("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(File::open_regular(fifo, why).is_open());
  EXPECT_EQ(why, "is a FIFO (named pipe); expected a regular file");
  EXPECT_FALSE(File::open_regular(scratch("missing"), why).is_open());
  EXPECT_EQ(why, "No such file or directory");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nnfleet
