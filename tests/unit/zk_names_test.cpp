// The ZooKeeper engine's lock znode names and where each request stands in a key's queue
// (the read/write lock recipe and the semaphore's).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zookeeper/zk_names.hpp"

namespace dlock::internal::zk {
namespace {

using Is = Standing::Is;

std::string znode(LockKind kind, int permits, const std::string& owner, int sequence) {
  return name_prefix(kind, permits, owner) + fmt::format("{:010}", sequence);
}

TEST(ZkNames, EachKindsNameReadsBackWithItsOwner) {
  // The owner is a view into the name.
  const std::string exclusive_name = znode(LockKind::kExclusive, 0, "a-b:1", 7);
  const std::string permit_name = znode(LockKind::kPermit, 12, "p-3", 9);
  const auto exclusive = lock_name_of(exclusive_name);
  ASSERT_TRUE(exclusive);
  EXPECT_EQ(exclusive->kind, LockKind::kExclusive);
  EXPECT_EQ(exclusive->owner, "a-b:1");
  const auto shared = lock_name_of(znode(LockKind::kShared, 0, "r", 8));
  ASSERT_TRUE(shared);
  EXPECT_EQ(shared->kind, LockKind::kShared);
  const auto permit = lock_name_of(permit_name);
  ASSERT_TRUE(permit);
  EXPECT_EQ(permit->kind, LockKind::kPermit);
  EXPECT_EQ(permit->permits, 12);
  EXPECT_EQ(permit->owner, "p-3");
  EXPECT_EQ(sequence_of(permit_name), 9);
}

TEST(ZkNames, OtherNamesAreNotLockZnodes) {
  for (const std::string name :
       {"a-owner-0000000001", "l--0000000001", "p-owner-0000000001", "p0-owner-0000000001",
        "px-owner-0000000001", "l-owner-000000001x", "l-owner", "s-owner0000000001", ""}) {
    EXPECT_FALSE(lock_name_of(name)) << name;
    EXPECT_EQ(owner_in(name), "") << name;
  }
}

TEST(ZkNames, ReadersShareWhileTheFirstWriterWaitsForThem) {
  const std::vector<std::string> queue{znode(LockKind::kShared, 0, "r1", 1),
                                       znode(LockKind::kShared, 0, "r2", 2),
                                       znode(LockKind::kExclusive, 0, "w", 3),
                                       znode(LockKind::kShared, 0, "r3", 4)};
  EXPECT_EQ(standing_of(kinds_in(queue), 1).is, Is::kHolder);
  EXPECT_EQ(standing_of(kinds_in(queue), 2).is, Is::kWaiter);
  EXPECT_EQ(standing_of(kinds_in(queue), 2).blocker, 1u);
  EXPECT_EQ(standing_of(kinds_in(queue), 3).is, Is::kWaiter);  // behind the writer
  EXPECT_EQ(standing_of(kinds_in(queue), 3).blocker, 2u);
}

TEST(ZkNames, APermitHoldsWhileFewerThanItsSemaphoresSizeAreBeforeIt) {
  const std::vector<std::string> queue{znode(LockKind::kPermit, 2, "a", 1),
                                       znode(LockKind::kPermit, 2, "b", 2),
                                       znode(LockKind::kPermit, 2, "c", 3)};
  EXPECT_EQ(standing_of(kinds_in(queue), 0).is, Is::kHolder);
  EXPECT_EQ(standing_of(kinds_in(queue), 1).is, Is::kHolder);
  EXPECT_EQ(standing_of(kinds_in(queue), 2).is, Is::kWaiter);
}

TEST(ZkNames, ASemaphoreOfAnotherSizeOrALockHeldFirstRefusesAPermit) {
  const std::vector<std::string> sizes{znode(LockKind::kPermit, 2, "a", 1),
                                       znode(LockKind::kPermit, 3, "b", 2)};
  EXPECT_EQ(standing_of(kinds_in(sizes), 1).is, Is::kRefused);
  const std::vector<std::string> lock{znode(LockKind::kShared, 0, "a", 1),
                                      znode(LockKind::kPermit, 3, "b", 2)};
  EXPECT_EQ(standing_of(kinds_in(lock), 1).is, Is::kRefused);
}

// An entry of another kind (refused, its delete not yet applied) is waited for: passed over,
// it would let a reader and a permit hold at once once the reader before it went.
TEST(ZkNames, AnEntryOfAnotherKindIsWaitedForNotPassedOver) {
  const std::vector<std::string> readers{znode(LockKind::kShared, 0, "s1", 1),
                                         znode(LockKind::kPermit, 2, "refused", 2),
                                         znode(LockKind::kShared, 0, "s2", 3)};
  EXPECT_EQ(standing_of(kinds_in(readers), 2).is, Is::kWaiter);
  EXPECT_EQ(standing_of(kinds_in(readers), 2).blocker, 1u);
  const std::vector<std::string> permits{znode(LockKind::kPermit, 2, "a", 1),
                                         znode(LockKind::kExclusive, 0, "refused", 2),
                                         znode(LockKind::kPermit, 2, "b", 3)};
  EXPECT_EQ(standing_of(kinds_in(permits), 2).is, Is::kWaiter) << "one permit of two before it";
  const std::vector<std::string> sizes{znode(LockKind::kPermit, 2, "a", 1),
                                       znode(LockKind::kPermit, 3, "refused", 2),
                                       znode(LockKind::kPermit, 2, "b", 3)};
  EXPECT_EQ(standing_of(kinds_in(sizes), 2).is, Is::kWaiter);
  const std::vector<std::string> writer{znode(LockKind::kPermit, 2, "refused", 1),
                                        znode(LockKind::kExclusive, 0, "w", 2)};
  EXPECT_EQ(standing_of(kinds_in(writer), 1).is, Is::kRefused) << "the key's first entry decides";
  // Unless the writer waits already: the entry came first since, and it keeps waiting.
  EXPECT_EQ(standing_of(kinds_in(writer), 1, true).is, Is::kWaiter);
  EXPECT_EQ(standing_of(kinds_in(writer), 1, true).blocker, 0u);
  const std::vector<std::string> permit{znode(LockKind::kShared, 0, "refused", 1),
                                        znode(LockKind::kPermit, 1, "p", 2)};
  EXPECT_EQ(standing_of(kinds_in(permit), 1, true).is, Is::kWaiter);
}

}  // namespace
}  // namespace dlock::internal::zk
