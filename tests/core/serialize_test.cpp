#include <gtest/gtest.h>

#include <boost/serialization/vector.hpp>

#include "core/check.h"
#include "core/serialize.h"

namespace mlpd {
namespace {

struct Detection {
  int32_t image = 0, label = 0;
  float score = 0, box[4] = {};
  template <class A>
  void serialize(A& ar, unsigned) {
    ar & image & label & score & box;
  }
};

TEST(Serialize, RecordsRoundTripExactly) {
  std::vector<Detection> in(3);
  for (int i = 0; i < 3; ++i) in[i] = {i, 7 - i, 0.1f * i, {1.5f, 2.5f, 3.25f, -0.0f}};
  const auto out = from_bytes<std::vector<Detection>>(to_bytes(in));
  ASSERT_EQ(out.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].image, i);
    EXPECT_EQ(out[i].label, 7 - i);
    EXPECT_EQ(out[i].score, 0.1f * i);
    EXPECT_EQ(out[i].box[2], 3.25f);
  }
  EXPECT_TRUE(from_bytes<std::vector<Detection>>(to_bytes(std::vector<Detection>{})).empty());
}

TEST(Serialize, TruncatedBytesAreAnErrorNotACrash) {
  std::vector<Detection> in(50);
  std::string bytes = to_bytes(in);
  bytes.resize(bytes.size() / 2);
  EXPECT_THROW(from_bytes<std::vector<Detection>>(bytes), UserError);
}

}  // namespace
}  // namespace mlpd
