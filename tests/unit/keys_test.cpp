#include <gtest/gtest.h>

#include <set>

#include "redis/keys.hpp"
#include "redis/scripts.hpp"
#include "redis/sha1.hpp"

namespace dlock::internal {
namespace {

TEST(LockKeys, EveryKeyOfOneLockSharesOneNonEmptyHashTag) {
  for (const std::string key : {"", "order:1", "{x}", "}{", "a:b:c"}) {
    const LockKeys k = lock_keys("svc", key);
    const auto tag = [](const std::string& s) {
      const auto open = s.find('{');
      const auto close = s.find('}', open + 1);
      return s.substr(open + 1, close - open - 1);
    };
    EXPECT_FALSE(tag(k.lock).empty()) << key;
    EXPECT_EQ(tag(k.lock), tag(k.fence)) << key;
    EXPECT_EQ(tag(k.lock), tag(k.channel)) << key;
  }
}

TEST(LockKeys, DistinctServiceAndKeyPairsNeverCollide) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"x", "a:b"}, {"x:a", "b"}, {"x", "a%3Ab"}, {"x", "a}b"}, {"x", "a{b"}, {"x}", "b"},
      {"x", ""},    {"", "x"},    {"x", "%"},     {"x", "%25"}, {"", ""},     {":", ":"}};
  std::set<std::string> seen;
  for (const auto& [service, key] : pairs) {
    EXPECT_TRUE(seen.insert(lock_keys(service, key).lock).second) << service << " / " << key;
  }
}

TEST(LockKeys, EscapingRoundTrips) {
  for (const std::string& text : std::vector<std::string>{"", "plain", "a:b{c}d%e", "%%::{{}}", std::string("\0\xff", 2)}) {
    EXPECT_EQ(unescape_key_part(escape_key_part(text)), text);
  }
  EXPECT_FALSE(unescape_key_part("%4").has_value());
  EXPECT_FALSE(unescape_key_part("%ZZ").has_value());
}

TEST(Sha1, MatchesKnownDigests) {
  EXPECT_EQ(sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(sha1_hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(sha1_hex(std::string(1000, 'a')), "291e9a6c66994949b57ba5e650361e98fc36b1ba");
}

TEST(Scripts, AreEmbeddedAndNamedByTheirDigest) {
  for (const Script* s : {&acquire_script(), &renew_script(), &release_script()}) {
    EXPECT_GT(s->text.size(), 100u) << s->name;
    EXPECT_EQ(s->sha, sha1_hex(s->text)) << s->name;
  }
}

}  // namespace
}  // namespace dlock::internal
