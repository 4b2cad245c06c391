#include "scaling/profile_json.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/check.h"

namespace mlpd::scaling {
namespace {

ScalingProfile sample_profile() {
  ScalingProfile p;
  p.seconds_per_sample = 1.25e-3;
  p.fixed_compute_s = 3e-4;
  p.other_s = 2e-3;
  p.grad_bytes = 4.36e6;
  p.overlap_fraction = 0.4;
  p.compute_cv = 0.07;
  p.cores_per_node = 2;
  p.threads_per_rank = 1;
  p.algo = AllreduceAlgo::hierarchical;
  p.intra = {1.7e-5, 2.1e-10};
  p.comm_fit_rms = 0.12;
  p.source = "test";
  return p;
}

ScaleFile sample_file() {
  ScaleFile f;
  f.benchmark = "resnet";
  f.scale = "mini";
  f.mode = "weak";
  f.points = {{1, 1, 128, 0.5, 0.45, 0.0, 0.0, 0.05, 0.03, 0.0}, {2, 2, 256, 0.6, 0.46, 0.06, 0.03, 0.05, 0.04, 0.1}};
  f.comm = {{2, 2, 4096, 1e-5}, {4, 2, 1 << 20, 1e-3}};
  f.grad_bytes = 4.36e6;
  f.cores_per_node = 2;
  f.profile = sample_profile();
  return f;
}

void expect_same(const ScalingProfile& a, const ScalingProfile& b) {
  EXPECT_EQ(a.seconds_per_sample, b.seconds_per_sample);
  EXPECT_EQ(a.fixed_compute_s, b.fixed_compute_s);
  EXPECT_EQ(a.other_s, b.other_s);
  EXPECT_EQ(a.grad_bytes, b.grad_bytes);
  EXPECT_EQ(a.overlap_fraction, b.overlap_fraction);
  EXPECT_EQ(a.compute_cv, b.compute_cv);
  EXPECT_EQ(a.cores_per_node, b.cores_per_node);
  EXPECT_EQ(a.threads_per_rank, b.threads_per_rank);
  EXPECT_EQ(a.algo, b.algo);
  EXPECT_EQ(a.intra.alpha_s, b.intra.alpha_s);
  EXPECT_EQ(a.intra.beta_s_per_byte, b.intra.beta_s_per_byte);
  EXPECT_EQ(a.comm_fit_rms, b.comm_fit_rms);
  EXPECT_EQ(a.source, b.source);
}

TEST(ProfileJson, round_trip_through_text) {
  const ScaleFile f = sample_file();
  const std::string text = to_json(f).dump();
  const ScaleFile g = scale_file_from_json(nlohmann::json::parse(text));
  EXPECT_EQ(g.benchmark, "resnet");
  EXPECT_EQ(g.scale, "mini");
  EXPECT_EQ(g.mode, "weak");
  EXPECT_EQ(g.grad_bytes, f.grad_bytes);
  EXPECT_EQ(g.cores_per_node, 2);
  expect_same(g.profile, f.profile);
  ASSERT_EQ(g.points.size(), 2u);
  EXPECT_EQ(g.points[1].ranks, 2);
  EXPECT_EQ(g.points[1].global_batch, 256);
  EXPECT_EQ(g.points[1].skew_s, 0.03);
  EXPECT_EQ(g.points[1].comm_busy_s, 0.1);
  EXPECT_EQ(g.points[0].compute_cv, 0.03);
  ASSERT_EQ(g.comm.size(), 2u);
  EXPECT_EQ(g.comm[1].ranks_per_node, 2);
  EXPECT_EQ(g.comm[1].bytes, 1 << 20);
  EXPECT_EQ(g.comm[1].seconds, 1e-3);
}

// The message of the UserError `fn` throws (exit code 2), or "" when it does not throw.
template <class F>
std::string error_of(F fn) {
  try {
    fn();
  } catch (const UserError& e) {
    EXPECT_EQ(e.exit_code, 2);
    return e.what();
  }
  return "";
}

TEST(ProfileJson, malformed_profiles_are_usage_errors_naming_the_field) {
  const nlohmann::json good = to_json(sample_profile());
  EXPECT_EQ(error_of([&] { profile_from_json(good); }), "");

  nlohmann::json j = good;
  j.erase("seconds_per_sample");
  EXPECT_NE(error_of([&] { profile_from_json(j); }).find("'seconds_per_sample' is missing"), std::string::npos);
  j = good;
  j["grad_bytes"] = "many";
  EXPECT_NE(error_of([&] { profile_from_json(j); }).find("'grad_bytes' must be a number"), std::string::npos);
  j = good;
  j["overlap_fraction"] = 1.5;
  EXPECT_NE(error_of([&] { profile_from_json(j); }).find("overlap_fraction"), std::string::npos);
  j = good;
  j["algo"] = "butterfly";
  EXPECT_NE(error_of([&] { profile_from_json(j); }).find("butterfly"), std::string::npos);
  j = good;
  j["intra"].erase("beta_s_per_byte");
  EXPECT_NE(error_of([&] { profile_from_json(j); }).find("profile.intra"), std::string::npos);
  j = good;
  j["other_s"] = -1.0;
  EXPECT_NE(error_of([&] { profile_from_json(j); }).find("other_s"), std::string::npos);
  EXPECT_NE(error_of([&] { profile_from_json(nlohmann::json::array()); }).find("object"), std::string::npos);

  nlohmann::json f = to_json(sample_file());
  f["points"][1]["ranks"] = 0;
  EXPECT_NE(error_of([&] { scale_file_from_json(f); }).find("points[1]"), std::string::npos);
  f = to_json(sample_file());
  f.erase("profile");
  EXPECT_NE(error_of([&] { scale_file_from_json(f); }).find("'profile' is missing"), std::string::npos);
}

TEST(ProfileJson, unreadable_or_non_json_files_are_usage_errors) {
  EXPECT_NE(error_of([] { read_scale_file("/nonexistent/scale.json"); }).find("cannot be opened"), std::string::npos);
  const std::string path = testing::TempDir() + "plan_not_json.json";
  {
    std::ofstream out(path);
    out << "{ \"benchmark\": ";
  }
  EXPECT_NE(error_of([&] { read_scale_file(path); }).find("not valid JSON"), std::string::npos);
  {
    std::ofstream out(path);
    out << to_json(sample_file()).dump(2);
  }
  EXPECT_EQ(read_scale_file(path).benchmark, "resnet");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace mlpd::scaling
