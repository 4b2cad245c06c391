#include <gtest/gtest.h>

#include <fstream>

#include "core/check.h"
#include "log_fixture.h"
#include "mlperf/config.h"

namespace mlpd {
namespace {

using namespace mlpd::testing;

const char* kDefaults = R"(
benchmark: resnet
global_batch_size: 256
opt_name: lars
opt_base_learning_rate: 0.1
lars_opt_weight_decay: 1.0e-4
lars_epsilon: 0.0
use_bn: true
submission_org: "123"
opt_learning_rate_decay_boundary_epochs: [30, 60]
warmup_factors: [0.5, 1]
)";

// Runs resolve_config expecting a UserError; returns it.
UserError config_error(const std::string& file, const std::vector<std::string>& sets) {
  try {
    resolve_config(kDefaults, file, sets);
  } catch (const UserError& e) {
    return e;
  }
  ADD_FAILURE() << "no UserError";
  return UserError("none");
}

TEST(Config, defaults_keep_their_types) {
  json c = resolve_config(kDefaults, "", {});
  EXPECT_TRUE(c["global_batch_size"].is_number_integer());
  EXPECT_EQ(c["global_batch_size"], 256);
  EXPECT_TRUE(c["opt_base_learning_rate"].is_number_float());
  EXPECT_DOUBLE_EQ(c["lars_opt_weight_decay"].get<double>(), 1e-4);
  EXPECT_TRUE(c["lars_epsilon"].is_number_float());
  EXPECT_TRUE(c["use_bn"].is_boolean());
  EXPECT_TRUE(c["submission_org"].is_string());
  EXPECT_EQ(c["opt_learning_rate_decay_boundary_epochs"], json({30, 60}));
  EXPECT_TRUE(c["opt_learning_rate_decay_boundary_epochs"][0].is_number_integer());
  EXPECT_TRUE(c["warmup_factors"][1].is_number_float());
}

TEST(Config, file_then_sets_override_in_order) {
  std::string dir = scratch_dir();
  std::ofstream(dir + "/c.yaml") << "global_batch_size: 1024\nopt_name: sgd\n"
                                    "opt_learning_rate_decay_boundary_epochs: [10, 20, 25]\n";
  json c = resolve_config(kDefaults, dir + "/c.yaml",
                          {"global_batch_size=2048", "opt_base_learning_rate=1", "use_bn=false",
                           "submission_org=42", "opt_learning_rate_decay_boundary_epochs=5,7",
                           "global_batch_size=4096"});
  EXPECT_EQ(c["global_batch_size"], 4096);
  EXPECT_EQ(c["opt_name"], "sgd");
  EXPECT_TRUE(c["opt_base_learning_rate"].is_number_float());  // 1 given to a float key stays a float
  EXPECT_DOUBLE_EQ(c["opt_base_learning_rate"].get<double>(), 1.0);
  EXPECT_EQ(c["use_bn"], false);
  EXPECT_EQ(c["submission_org"], "42");
  EXPECT_EQ(c["opt_learning_rate_decay_boundary_epochs"], json({5, 7}));
  json d = resolve_config(kDefaults, "", {"opt_learning_rate_decay_boundary_epochs=[3, 6]"});
  EXPECT_EQ(d["opt_learning_rate_decay_boundary_epochs"], json({3, 6}));
}

TEST(Config, unknown_key_is_rejected_naming_it_and_close_keys) {
  UserError e = config_error("", {"opt_base_lr=0.1"});
  std::string m = e.what();
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(m.find("unknown config key 'opt_base_lr'"), std::string::npos) << m;
  EXPECT_NE(m.find("opt_base_learning_rate"), std::string::npos) << m;

  std::string dir = scratch_dir();
  std::ofstream(dir + "/c.yaml") << "global_batch_sise: 1024\n";
  e = config_error(dir + "/c.yaml", {});
  m = e.what();
  EXPECT_NE(m.find("'global_batch_sise'"), std::string::npos) << m;
  EXPECT_NE(m.find("global_batch_size"), std::string::npos) << m;
  EXPECT_NE(m.find("c.yaml"), std::string::npos) << m;
}

TEST(Config, set_type_errors_name_key_value_and_type) {
  struct Case {
    const char* set;
    const char* key;
    const char* value;
    const char* type;
  } cases[] = {
      {"global_batch_size=abc", "global_batch_size", "abc", "an integer"},
      {"global_batch_size=2.5", "global_batch_size", "2.5", "an integer"},
      {"opt_base_learning_rate=fast", "opt_base_learning_rate", "fast", "a number"},
      {"opt_base_learning_rate=true", "opt_base_learning_rate", "true", "a number"},
      {"use_bn=maybe", "use_bn", "maybe", "a bool"},
      {"opt_learning_rate_decay_boundary_epochs=30,x", "opt_learning_rate_decay_boundary_epochs", "30,x",
       "a list of integers"},
  };
  for (const auto& c : cases) {
    UserError e = config_error("", {c.set});
    std::string m = e.what();
    EXPECT_EQ(e.exit_code, 2) << c.set;
    EXPECT_NE(m.find(std::string("'") + c.key + "'"), std::string::npos) << m;
    EXPECT_NE(m.find(std::string("'") + c.value + "'"), std::string::npos) << m;
    EXPECT_NE(m.find(c.type), std::string::npos) << m;
  }
  EXPECT_NE(std::string(config_error("", {"noequals"}).what()).find("key=value"), std::string::npos);
}

TEST(Config, file_type_errors_are_rejected) {
  std::string dir = scratch_dir();
  std::ofstream(dir + "/c.yaml") << "global_batch_size: \"256\"\n";  // a quoted string is not a number
  std::string m = config_error(dir + "/c.yaml", {}).what();
  EXPECT_NE(m.find("global_batch_size"), std::string::npos) << m;
  EXPECT_NE(m.find("an integer"), std::string::npos) << m;
  EXPECT_THROW(resolve_config(kDefaults, dir + "/missing.yaml", {}), UserError);
}

TEST(Config, integral_float_is_accepted_for_an_integer_key) {
  json c = resolve_config(kDefaults, "", {"global_batch_size=512.0"});
  EXPECT_TRUE(c["global_batch_size"].is_number_integer());
  EXPECT_EQ(c["global_batch_size"], 512);
}

TEST(Config, format_config_is_sorted_key_value_lines) {
  json c = resolve_config("b: 2\na: x\nc: [1, 2]\n", "", {});
  EXPECT_EQ(format_config(c), "a: x\nb: 2\nc: [1,2]\n");
}

// A repeated key would have one of its values silently win.
TEST(Config, duplicate_keys_are_errors) {
  const std::string f = scratch_dir() + "/dup.yaml";
  std::ofstream(f) << "global_batch_size: 512\nopt_base_learning_rate: 0.2\nglobal_batch_size: 1024\n";
  UserError e = config_error(f, {});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(std::string(e.what()).find("key 'global_batch_size' appears more than once"), std::string::npos) << e.what();
}

// A second YAML document would be ignored.
TEST(Config, several_yaml_documents_are_an_error) {
  const std::string f = scratch_dir() + "/multi.yaml";
  std::ofstream(f) << "global_batch_size: 512\n---\nglobal_batch_size: 1024\n";
  UserError e = config_error(f, {});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(std::string(e.what()).find("2 YAML documents"), std::string::npos) << e.what();
}

// A huge file is refused before it is parsed (it would take gigabytes on every rank).
TEST(Config, oversized_file_is_refused_before_parsing) {
  const std::string f = scratch_dir() + "/big.yaml";
  {
    std::ofstream out(f);
    out << "global_batch_size: 512\n";
    for (int i = 0; i < 300000; ++i) out << "# padding\n";
  }
  UserError e = config_error(f, {});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(std::string(e.what()).find("larger than 256 KiB"), std::string::npos) << e.what();
}

TEST(Config, a_key_that_is_not_a_name_is_an_error) {
  const std::string f = scratch_dir() + "/complexkey.yaml";
  std::ofstream(f) << "? [a, b]\n: 3\n";
  EXPECT_EQ(config_error(f, {}).exit_code, 2);
}

}  // namespace
}  // namespace mlpd
