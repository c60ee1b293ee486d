// The parts of a cluster renewal round that need no server: how long a round waits, and
// what one server's replies make of its items.
#include "redis/renewal_round.hpp"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <string>

namespace dlock::internal {
namespace {

using namespace std::chrono_literals;

RenewItem item_valid_until(Clock::time_point valid_until) {
  RenewItem item{nullptr, "owner", Millis{1000}};
  item.valid_until = valid_until;
  return item;
}

// A server's integer reply, read by hiredis as from the wire.
Reply integer_reply(long long value) {
  redisReader* reader = redisReaderCreate();
  const std::string wire = ":" + std::to_string(value) + "\r\n";
  redisReaderFeed(reader, wire.data(), wire.size());
  void* raw = nullptr;
  redisReaderGetReply(reader, &raw);
  redisReaderFree(reader);
  return Reply::ok(static_cast<redisReply*>(raw));
}

TEST(RoundEnd, WaitsAThirdOfTheShortestLeaseBetweenFiftyMillisecondsAndACommandTimeout) {
  const auto now = Clock::now();
  const std::vector<RenewItem> none;
  EXPECT_EQ(RoundEnd::of(none, Millis{900}, Millis{1000}, now).deadline, now + 300ms);
  EXPECT_EQ(RoundEnd::of(none, Millis{30}, Millis{1000}, now).deadline, now + 50ms);
  EXPECT_EQ(RoundEnd::of(none, Millis{30'000}, Millis{1000}, now).deadline, now + 1000ms);
}

TEST(RoundEnd, EndsShortlyBeforeTheFirstValidityAmongItsItems) {
  const auto now = Clock::now();
  const std::vector<RenewItem> items{item_valid_until(now + 5s), item_valid_until(now + 200ms)};
  const RoundEnd end = RoundEnd::of(items, Millis{3000}, Millis{1000}, now);
  EXPECT_EQ(end.latest, now + 175ms);
  EXPECT_EQ(end.deadline, now + 175ms);
  EXPECT_EQ(end.takes_until(), now + 125ms) << "a late connection's replies get 50 ms";
}

// An item about to expire (a short lease, or a retry near the end of its validity) must not
// cut the round so short that healthy servers are judged silent for answering in 1 ms.
TEST(RoundEnd, AnItemAboutToExpireLeavesEveryServerFiftyMilliseconds) {
  const auto now = Clock::now();
  const std::vector<RenewItem> items{item_valid_until(now + 10ms), item_valid_until(now + 2s)};
  const RoundEnd end = RoundEnd::of(items, Millis{30}, Millis{1000}, now);
  EXPECT_GE(end.deadline, now + 50ms);
  EXPECT_EQ(end.latest, now + 2s - 25ms);
  const std::vector<RenewItem> expired{item_valid_until(now - 5ms)};
  EXPECT_GE(RoundEnd::of(expired, Millis{30}, Millis{1000}, now).deadline, now + 50ms);
}

TEST(RoundEnd, RepliesAfterTheTakesGetFiftyMillisecondsEvenPastTheDeadline) {
  const auto now = Clock::now();
  const RoundEnd end{now - 10ms, Clock::time_point::max()};
  EXPECT_GE(end.after_takes(), now + 50ms);
}

TEST(SettleServer, AServerThatLeftTheRoundUnansweredFailsAllItsItemsAndIsSilent) {
  ConnectionPool pool(Endpoint{"127.0.0.1", 1}, BackendConfig{});
  std::vector<RenewItem> items(3, item_valid_until(Clock::time_point::max()));
  std::vector<Reply> replies;
  replies.push_back(Reply::failed(Reply::Status::kTimeout, "no reply"));
  replies.push_back(Reply::failed(Reply::Status::kTimeout, "no reply"));
  std::vector<std::size_t> unrouted;
  EXPECT_EQ(settle_server(items, {0, 2}, replies, pool, false, unrouted), Heard::kSilent);
  EXPECT_EQ(items[0].outcome, RenewOutcome::kUnavailable);
  EXPECT_EQ(items[2].outcome, RenewOutcome::kUnavailable);
  EXPECT_TRUE(unrouted.empty()) << "a silent server's items were sent one by one";
  EXPECT_TRUE(pool.silent());

  // Its next answer clears that.
  std::vector<Reply> answered;
  answered.push_back(integer_reply(1));
  EXPECT_NE(settle_server(items, {1}, answered, pool, false, unrouted), Heard::kSilent);
  EXPECT_EQ(items[1].outcome, RenewOutcome::kRenewed);
  EXPECT_FALSE(pool.silent());
}

TEST(SettleServer, ItemsOfAServerThatRefusedGoOneByOne) {
  ConnectionPool pool(Endpoint{"127.0.0.1", 1}, BackendConfig{});
  std::vector<RenewItem> items(2, item_valid_until(Clock::time_point::max()));
  std::vector<Reply> replies;
  replies.push_back(integer_reply(0));
  replies.push_back(Reply::failed(Reply::Status::kBroken, "connection reset"));
  std::vector<std::size_t> unrouted;
  EXPECT_NE(settle_server(items, {0, 1}, replies, pool, false, unrouted), Heard::kSilent);
  EXPECT_EQ(items[0].outcome, RenewOutcome::kGone);
  EXPECT_EQ(unrouted, std::vector<std::size_t>{1});
  EXPECT_FALSE(pool.silent());
}

}  // namespace
}  // namespace dlock::internal
