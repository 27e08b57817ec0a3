#include "sched/resources.h"

#include <gtest/gtest.h>

namespace sray::sched {
namespace {

TEST(ResourceList, ParsesNamesAndAmounts) {
  auto parsed = ParseResourceList("GPU:2; ssd:0.5");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, (ResourceMap{{"GPU", 2.0}, {"ssd", 0.5}}));
}

TEST(ResourceList, RejectsMalformedEntriesWithTheFix) {
  EXPECT_NE(ParseResourceList("GPU").status().message().find("NAME:AMOUNT"), std::string::npos);
  EXPECT_FALSE(ParseResourceList("GPU:-1").ok());
  EXPECT_FALSE(ParseResourceList("GPU:two").ok());
  EXPECT_FALSE(ParseResourceList("GPU:1;GPU:2").ok());
}

TEST(ResourceRequest, DefaultsToOneCpuAndRejectsMixedGpus) {
  EXPECT_EQ(*NormalizeRequest({}), (ResourceMap{{"CPU", 1.0}}));
  EXPECT_FALSE(NormalizeRequest({{"GPU", 1.5}}).ok());
  EXPECT_TRUE(NormalizeRequest({{"GPU", 0.5}}).ok());
  EXPECT_FALSE(NormalizeRequest({{"CPU", -1}}).ok());
}

TEST(ResourceRequest, FitsWithFractionsThatDoNotAddUpExactly) {
  ResourceMap available{{"CPU", 1.0}};
  Subtract(available, {{"CPU", 0.1}});
  Subtract(available, {{"CPU", 0.2}});
  EXPECT_TRUE(Fits({{"CPU", 0.7}}, available));
  EXPECT_FALSE(Fits({{"CPU", 0.8}}, available));
  EXPECT_FALSE(Fits({{"ssd", 1}}, available));
}

TEST(GpuDevices, HalfRequestsShareOneDeviceAndWholeOnesTakeWholeDevices) {
  GpuDevices devices(2);
  auto first = devices.Acquire(0.5);
  auto second = devices.Acquire(0.5);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(*first, *second);  // best fit keeps the other device whole
  auto whole = devices.Acquire(1);
  ASSERT_TRUE(whole);
  EXPECT_NE(whole->front(), first->front());
  EXPECT_FALSE(devices.Acquire(0.5));
  devices.Release(*whole, 1);
  EXPECT_TRUE(devices.Acquire(1));
  EXPECT_EQ(DeviceList({0, 2}), "0,2");
}

}  // namespace
}  // namespace sray::sched
