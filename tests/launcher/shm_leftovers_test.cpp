// What a node daemon removes from /dev/shm when its ranks have ended: its own ranks' segments
// only (several hosts of a job can share one /dev/shm: network namespaces on one machine).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <string>

#include "orphan_guard.hpp"
#include "spark/protocol/flight_recorder.hpp"
#include "spark/protocol/shm_segment.hpp"

namespace spark::launch {
namespace {

namespace seg = protocol::shm_segment;

TEST(ShmLeftovers, RankOfReadsBothKindsOfNames) {
  const std::string job = "sparkrun.42.ab";
  EXPECT_EQ(seg::rank_of(seg::name(job, "spark-1", 7, 4242, 9).substr(1), job), 7);
  EXPECT_EQ(seg::rank_of(seg::name(job, "host-r3-x", 12, 1, 65535).substr(1), job), 12);
  EXPECT_EQ(seg::rank_of(protocol::flight::segment_name(job, 5).substr(1), job), 5);
  EXPECT_EQ(seg::rank_of(seg::name("other.job", "h", 7, 1, 1).substr(1), job), -1);
  EXPECT_EQ(seg::rank_of(seg::job_prefix(job) + "h-r7-x-1", job), -1);
  EXPECT_EQ(seg::rank_of(seg::job_prefix(job) + "h-7-1-1", job), -1);
  EXPECT_EQ(seg::rank_of(seg::job_prefix(job) + "flight-rx", job), -1);
}

TEST(ShmLeftovers, ANodeRemovesItsOwnRanksSegmentsOnly) {
  const std::string job = "leftovers-test." + std::to_string(::getpid());
  const std::string names[] = {
      seg::name(job, "hostA", 0, 100, 1), protocol::flight::segment_name(job, 0),
      seg::name(job, "hostB", 1, 101, 2), protocol::flight::segment_name(job, 1)};
  for (const auto& n : names) {
    const int fd = ::shm_open(n.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    ASSERT_GE(fd, 0) << n;
    ::close(fd);
  }
  auto exists = [](const std::string& n) { return ::access(("/dev/shm" + n).c_str(), F_OK) == 0; };
  EXPECT_EQ(OrphanGuard::remove_shm_leftovers(job, {1}), 2);
  EXPECT_TRUE(exists(names[0]));
  EXPECT_TRUE(exists(names[1]));
  EXPECT_FALSE(exists(names[2]));
  EXPECT_FALSE(exists(names[3]));
  EXPECT_EQ(OrphanGuard::remove_shm_leftovers(job, {0, 1}), 2);
  for (const auto& n : names) EXPECT_FALSE(exists(n)) << n;
}

}  // namespace
}  // namespace spark::launch
