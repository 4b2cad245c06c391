#include <gtest/gtest.h>

#include "core/check.h"
#include "log_fixture.h"
#include "mlperf/keys.h"
#include "mlperf/mllog.h"

namespace mlpd {
namespace {

using namespace mlpd::testing;

TEST(MlLog, line_has_official_fields_and_short_file) {
  auto loc = std::source_location::current();
  std::string line = format_mllog_line(1234, keys::kIntervalEnd, keys::kRunStop, nullptr,
                                       {{keys::kStatus, keys::kSuccess}}, loc);
  ASSERT_EQ(line.rfind(":::MLLOG {", 0), 0u) << line;
  json j = json::parse(line.substr(9));
  EXPECT_EQ(j["namespace"], "");
  EXPECT_EQ(j["time_ms"], 1234);
  EXPECT_TRUE(j["time_ms"].is_number_integer());
  EXPECT_EQ(j["event_type"], "INTERVAL_END");
  EXPECT_EQ(j["key"], "run_stop");
  EXPECT_TRUE(j["value"].is_null());
  EXPECT_EQ(j["metadata"]["file"], "tests/mlperf/mllog_test.cpp");
  EXPECT_EQ(j["metadata"]["lineno"], loc.line());
  EXPECT_EQ(j["metadata"]["status"], "success");
  // Field order as mlperf_logging writes it.
  EXPECT_LT(line.find("\"namespace\""), line.find("\"time_ms\""));
  EXPECT_LT(line.find("\"key\""), line.find("\"value\""));
  EXPECT_LT(line.find("\"value\""), line.find("\"metadata\""));
}

TEST(MlLog, short_source_path_falls_back_to_basename) {
  EXPECT_EQ(short_source_path("/elsewhere/dir/x.cpp"), "x.cpp");
  EXPECT_EQ(short_source_path("src/a.cpp"), "src/a.cpp");
}

TEST(MlLog, disabled_logger_is_a_no_op) {
  std::string dir = scratch_dir();
  MlLog log = open_mllog(false, dir + "/results", "sys", "resnet", false);
  EXPECT_FALSE(log.enabled());
  mllog_event(log, keys::kSeed, 1);
  mllog_start(log, keys::kRunStart);
  EXPECT_EQ(close_mllog(log), "");
  EXPECT_FALSE(fs::exists(dir + "/results"));
}

TEST(MlLog, every_line_is_flushed_before_close) {
  std::string dir = scratch_dir();
  MlLog log = open_mllog(true, dir, "sys", "resnet", false);
  mllog_event(log, keys::kSeed, 7);
  // The open log may be unnamed (O_TMPFILE): read it through its descriptor.
  std::string text = read_text("/proc/self/fd/" + std::to_string(fileno(log.file)));
  EXPECT_NE(text.find("\"key\":\"seed\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"value\":7"), std::string::npos);
  std::string path = close_mllog(log);
  EXPECT_EQ(path, dir + "/sys/resnet/result_0.txt");
  EXPECT_EQ(read_text(path), text);
}

// A process killed while its log is open (SIGKILL after another rank died) must leave no file: the
// open log has no name in the directory.
TEST(MlLog, an_open_log_has_no_name_until_closed) {
  std::string dir = scratch_dir();
  MlLog log = open_mllog(true, dir, "sys", "resnet", false);
  mllog_event(log, keys::kSeed, 7);
  if (log.anonymous) {
    EXPECT_TRUE(fs::is_empty(dir + "/sys/resnet"));
  } else {  // a file system without O_TMPFILE: one hidden temporary, never a result name
    for (const auto& e : fs::directory_iterator(dir + "/sys/resnet"))
      EXPECT_EQ(e.path().filename().string().rfind(".result_", 0), 0u) << e.path();
  }
  EXPECT_EQ(close_mllog(log), dir + "/sys/resnet/result_0.txt");
}

TEST(MlLog, result_numbering_never_overwrites) {
  std::string dir = scratch_dir();
  fs::create_directories(dir + "/sys/resnet");
  std::ofstream(dir + "/sys/resnet/result_0.txt") << "keep me\n";
  MlLog a = open_mllog(true, dir, "sys", "resnet", false);
  mllog_event(a, keys::kSeed, 1);
  EXPECT_EQ(close_mllog(a), dir + "/sys/resnet/result_1.txt");
  EXPECT_EQ(read_text(dir + "/sys/resnet/result_0.txt"), "keep me\n");
  // Two logs open at once: whichever closes first takes the next free number.
  MlLog b = open_mllog(true, dir, "sys", "resnet", false);
  MlLog c = open_mllog(true, dir, "sys", "resnet", false);
  EXPECT_NE(fileno(b.file), fileno(c.file));
  mllog_event(b, keys::kSeed, 2);
  mllog_event(c, keys::kSeed, 3);
  EXPECT_EQ(close_mllog(c), dir + "/sys/resnet/result_2.txt");
  EXPECT_EQ(close_mllog(b), dir + "/sys/resnet/result_3.txt");
  EXPECT_NE(read_text(dir + "/sys/resnet/result_2.txt").find("\"value\":3"), std::string::npos);
  EXPECT_EQ(read_text(dir + "/sys/resnet/result_1.txt").find("\"value\":2"), std::string::npos);
  for (const auto& e : fs::directory_iterator(dir + "/sys/resnet"))
    EXPECT_EQ(e.path().extension(), ".txt") << "temporary file left: " << e.path();
}

// An exception unwinding past an open log leaves nothing: no result name, no temporary file.
TEST(MlLog, destructor_without_close_removes_the_incomplete_log) {
  std::string dir = scratch_dir();
  try {
    MlLog log = open_mllog(true, dir, "sys", "resnet", false);
    mllog_start(log, keys::kRunStart);
    throw std::runtime_error("fault during training");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(fs::is_empty(dir + "/sys/resnet")) << "left: " << fs::directory_iterator(dir + "/sys/resnet")->path();
}

TEST(MlLog, discard_removes_the_temporary_file) {
  std::string dir = scratch_dir();
  MlLog log = open_mllog(true, dir, "sys", "resnet", false);
  mllog_event(log, keys::kSeed, 1);
  discard_mllog(log);
  EXPECT_FALSE(log.enabled());
  EXPECT_TRUE(fs::is_empty(dir + "/sys/resnet"));
  EXPECT_EQ(close_mllog(log), "");
}

TEST(MlLog, move_keeps_one_owner) {
  std::string dir = scratch_dir();
  MlLog a = open_mllog(true, dir, "sys", "resnet", false);
  MlLog b = std::move(a);
  EXPECT_FALSE(a.enabled());
  mllog_event(b, keys::kSeed, 1);
  EXPECT_EQ(close_mllog(b), dir + "/sys/resnet/result_0.txt");
  EXPECT_EQ(close_mllog(b), "");
}

TEST(MlLog, metadata_must_be_an_object) {
  std::string dir = scratch_dir();
  MlLog log = open_mllog(true, dir, "sys", "resnet", false);
  EXPECT_THROW(mllog_event(log, keys::kSeed, 1, json::array({1, 2})), std::invalid_argument);
  close_mllog(log);
}

}  // namespace
}  // namespace mlpd
