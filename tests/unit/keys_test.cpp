#include <gtest/gtest.h>

#include <set>

#include "redis/backend_admin.hpp"
#include "redis/crc16.hpp"
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
      {"x", ""},    {"", "x"},    {"x", "%"},     {"x", "%25"}, {"", ""},     {":", ":"},
      {"x", "{a}"}, {"x", "a"},   {"x", "{a}b"},  {"x", "b{a}"}, {"x", "{a}:b"}, {"x:{a}", "b"},
      {"x", "{}a"}, {"x", "{a"},  {"x", "a}"},    {"x", "{{a}}"}};
  std::set<std::string> seen;
  for (const auto& [service, key] : pairs) {
    EXPECT_TRUE(seen.insert(lock_keys(service, key).lock).second) << service << " / " << key;
  }
}

TEST(LockKeys, AKeyWithAHashTagIsPlacedByIt) {
  EXPECT_EQ(lock_keys("shop", "acct:{42}:from").lock, "dlock:{shop:42}:acct%3A%7B42%7D%3Afrom:lock");
  EXPECT_EQ(lock_keys("shop", "order:7").lock, "dlock:{shop:order%3A7}:lock");
  // Redis's rule: the first '{', the next '}', and an empty tag is none.
  EXPECT_EQ(hash_tag_of("a{b}c{d}"), "b");
  EXPECT_EQ(hash_tag_of("{{a}}"), "{a");
  EXPECT_FALSE(hash_tag_of("{}a{b}").has_value());
  EXPECT_FALSE(hash_tag_of("a}{b").has_value());
  // Keys of one service with one tag share a slot; the same tag in another service need not.
  const int slot = key_slot(lock_keys("shop", "acct:{42}:from").lock);
  EXPECT_EQ(key_slot(lock_keys("shop", "acct:{42}:to").holders), slot);
  EXPECT_EQ(key_slot(lock_keys("shop", "{42}").channel), slot);
  EXPECT_EQ(key_slot(lock_keys("shop", "42").lock), slot);
}

TEST(LockKeys, ListingReadsBackEveryKeyOfItsOwnService) {
  for (const std::string key : {"", "order:1", "{x}", "}{", "a:b:c", "acct:{42}:from", "{}a{b}",
                                "{{a}}", "a{b}c{d}", "%7B", "x}:y"}) {
    for (const char* kind : {"lock", "run"}) {
      std::string redis_key = lock_keys("svc", key).lock;
      redis_key.replace(redis_key.size() - 4, 4, kind);
      EXPECT_EQ(admin::user_key_of("svc", redis_key, kind), key) << redis_key;
      EXPECT_FALSE(admin::user_key_of("svc2", redis_key, kind).has_value()) << redis_key;
    }
  }
  // Not a lock of this layout: an untagged name whose key has a tag, or a tag that is not the key's.
  EXPECT_FALSE(admin::user_key_of("svc", "dlock:{svc:%7Ba%7D}:lock", "lock").has_value());
  EXPECT_FALSE(admin::user_key_of("svc", "dlock:{svc:b}:%7Ba%7D:lock", "lock").has_value());
  EXPECT_FALSE(admin::user_key_of("svc", "dlock:{svc:a}x:lock", "lock").has_value());
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
