// The shared vocabulary of common/: one set of rules for the runtime, the configuration,
// the generator and dlockctl.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/common/duration.hpp"
#include "dlock/common/suggest.hpp"
#include "dlock/common/text.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::common::closest_match;
using dlock::common::DurationError;
using dlock::common::edit_distance;
using dlock::common::endpoint_text;
using dlock::common::kLogText;
using dlock::common::kMessageText;
using dlock::common::kTerminalText;
using dlock::common::percent_decode;
using dlock::common::printable;
using dlock::common::read_duration;

TEST(CommonText, ControlBytesAreEscapedInEveryProfile) {
  for (const auto& profile : {kLogText, kMessageText, kTerminalText}) {
    EXPECT_EQ(printable(std::string_view("a\x01\n\x7f", 4), profile), "a\\x01\\x0a\\x7f");
    EXPECT_EQ(printable("plain key:1", profile), "plain key:1");
  }
}

TEST(CommonText, ProfilesDifferInUtf8AndBackslash) {
  EXPECT_EQ(printable("caf\xc3\xa9", kLogText), "caf\\xc3\\xa9");
  EXPECT_EQ(printable("caf\xc3\xa9", kMessageText), "caf\xc3\xa9");
  EXPECT_EQ(printable("caf\xc3\xa9", kTerminalText), "caf\\xc3\\xa9");
  EXPECT_EQ(printable("a\\b", kLogText), "a\\x5cb");
  EXPECT_EQ(printable("a\\b", kMessageText), "a\\b");
  EXPECT_EQ(printable("a\\b", kTerminalText), "a\\\\b");
}

TEST(CommonText, LongTextIsCutOutsideAUtf8Sequence) {
  const std::string long_key(200, 'k');
  EXPECT_EQ(printable(long_key, kLogText), std::string(120, 'k') + "...(200 bytes)");
  EXPECT_EQ(printable(long_key, kTerminalText), long_key);
  std::string accented(79, 'a');
  accented += "\xc3\xa9tail";  // the é straddles byte 80
  EXPECT_EQ(printable(accented, kMessageText), std::string(79, 'a') + "...(85 bytes)");
}

TEST(CommonText, EscapedLogTextIsCutByTheLengthOfTheLine) {
  // Every byte escaped: the line is cut at 120 characters, as for plain text.
  const std::string control(50, '\x01');
  std::string escaped;
  for (int i = 0; i < 30; ++i) escaped += "\\x01";
  EXPECT_EQ(printable(control, kLogText), escaped + "...(50 bytes)");
  // Bytes that look like UTF-8 continuations are escaped, not dropped as half a character.
  const std::string high(200, '\x80');
  EXPECT_EQ(printable(high, kLogText).substr(0, 8), "\\x80\\x80");
}

TEST(CommonText, PercentDecoding) {
  EXPECT_EQ(percent_decode("p%40ss%3a%2F"), "p@ss:/");
  EXPECT_EQ(percent_decode("100%"), std::nullopt);
  EXPECT_EQ(percent_decode("%4"), std::nullopt);
  EXPECT_EQ(percent_decode("%zz"), std::nullopt);
  // The strict form: only the listed bytes, in upper-case hex.
  EXPECT_EQ(percent_decode("a%3Ab%25%7B%7D", "%:{}"), "a:b%{}");
  EXPECT_EQ(percent_decode("a%3ab", "%:{}"), std::nullopt);
  EXPECT_EQ(percent_decode("%41", "%:{}"), std::nullopt);
}

TEST(CommonText, EndpointText) {
  EXPECT_EQ(endpoint_text("redis1", 6379), "redis1:6379");
  EXPECT_EQ(endpoint_text("::1", 7000), "[::1]:7000");
}

TEST(CommonSuggest, DistanceCountsASwapAsOne) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("on_bsuy", "on_busy"), 1u);
  EXPECT_EQ(edit_distance("regoin", "region"), 1u);
}

TEST(CommonSuggest, ClosestMatch) {
  const std::array<std::string_view, 3> keys{"lease", "wait", "on_busy"};
  EXPECT_EQ(closest_match("leese", keys), "lease");
  EXPECT_EQ(closest_match("onbusy", keys), "on_busy");
  EXPECT_EQ(closest_match("timeout", keys), std::nullopt);
  EXPECT_EQ(closest_match("lease", keys), std::nullopt) << "an exact match is no typo";
  EXPECT_EQ(closest_match("x", std::vector<std::string>{"id"}), std::nullopt);
  EXPECT_EQ(closest_match("ab", std::vector<std::string>{"ac", "ad"}), "ac");
  // At most three edits, however long the word.
  EXPECT_EQ(closest_match("abcdefghijkwxyz", std::vector<std::string>{"abcdefghijklmno"}),
            std::nullopt);
  EXPECT_EQ(closest_match(std::string(65, 'a'), std::vector<std::string>{std::string(64, 'a')}),
            std::nullopt);
}

TEST(CommonDuration, Grammar) {
  EXPECT_EQ(read_duration("250ms").value, 250ms);
  EXPECT_EQ(read_duration("30s").value, 30s);
  EXPECT_EQ(read_duration("10m").value, 10min);
  EXPECT_EQ(read_duration("1h").value, 1h);
  EXPECT_EQ(read_duration("007s").value, 7s);
  EXPECT_EQ(read_duration("30").error, DurationError::kNoUnit);
  EXPECT_EQ(read_duration("s").error, DurationError::kNoNumber);
  EXPECT_EQ(read_duration("-1s").error, DurationError::kNoNumber);
  EXPECT_EQ(read_duration("2d").error, DurationError::kUnknownUnit);
  EXPECT_EQ(read_duration("2d").unit, "d");
}

TEST(CommonDuration, TheUpperBoundFitsInNanoseconds) {
  EXPECT_EQ(read_duration("9223372036854ms").value, 9223372036854ms);
  EXPECT_EQ(read_duration("9223372036855ms").error, DurationError::kTooLarge);
  EXPECT_EQ(read_duration("2562047h").value, 2562047h);
  EXPECT_EQ(read_duration("2562048h").error, DurationError::kTooLarge);
  static_assert(read_duration("1h").value == std::chrono::milliseconds(3'600'000));
}

}  // namespace
