#include <gtest/gtest.h>

#include "common/blob.hpp"
#include "proto/caffe.pb.h"

namespace pstrain {
namespace {

TEST(BlobTest, ShapeAndCount) {
  Blob b({2, 3, 4, 5});
  EXPECT_EQ(b.count(), 120);
  EXPECT_EQ(b.count(1), 60);
  EXPECT_EQ(b.count(1, 3), 12);
  EXPECT_EQ(b.shape(-1), 5);
  EXPECT_EQ(b.num(), 2);
  EXPECT_EQ(b.width(), 5);
  EXPECT_EQ(b.shape_string(), "2 3 4 5 (120)");
  Blob v({7});
  EXPECT_EQ(v.channels(), 1);
}

TEST(BlobTest, ReshapeKeepsStorageWhenSmaller) {
  Blob b({10});
  b.mutable_cpu_data()[0] = 3.f;
  const float* before = b.cpu_data();
  b.Reshape({2, 5});
  EXPECT_EQ(b.cpu_data(), before);
  EXPECT_EQ(b.cpu_data()[0], 3.f);
  b.Reshape({3, 5});
  EXPECT_EQ(b.count(), 15);
}

TEST(BlobTest, ProtoRoundTripAndLegacyShapes) {
  Blob b({2, 3});
  for (int i = 0; i < 6; ++i) b.mutable_cpu_data()[i] = static_cast<float>(i) * 0.5f;
  caffe::BlobProto proto;
  b.ToProto(&proto);
  Blob c({2, 3});
  ASSERT_TRUE(c.FromProto(proto, false).ok());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.cpu_data()[i], b.cpu_data()[i]);

  caffe::BlobProto legacy;
  legacy.set_num(1);
  legacy.set_channels(1);
  legacy.set_height(2);
  legacy.set_width(3);
  for (int i = 0; i < 6; ++i) legacy.add_data(1.f);
  EXPECT_TRUE(c.FromProto(legacy, false).ok());

  Blob wrong({3, 2});
  Status s = wrong.FromProto(proto, false);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "shape mismatch: the file has 2 3 (6), the net has 3 2 (6)");
}

TEST(BlobTest, ShareData) {
  Blob a({4});
  Blob b({4});
  b.ShareData(a);
  a.mutable_cpu_data()[2] = 7.f;
  EXPECT_EQ(b.cpu_data()[2], 7.f);
  EXPECT_TRUE(b.SharesDataWith(a));
}

}  // namespace
}  // namespace pstrain
