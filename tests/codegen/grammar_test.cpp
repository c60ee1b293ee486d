// The pure parts of the attribute grammar: edit distance, durations, key templates and the
// options, on text, without clang's AST.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dlock/codegen/attribute_lexer.hpp"
#include "dlock/codegen/duration.hpp"
#include "dlock/codegen/edit_distance.hpp"
#include "dlock/codegen/guard_parser.hpp"
#include "dlock/codegen/key_template.hpp"

namespace dlock::codegen {
namespace {

using namespace std::chrono_literals;

// Parses the inside of `[[dlock::guard(...)]]`; offsets are relative to `text`.
GuardParse parse(const std::string& text) {
  return parse_guard_arguments(lex_arguments(text), text.size());
}

KeyTemplate key(const std::string& literal, std::vector<Problem>* problems = nullptr) {
  KeyTemplate result;
  std::vector<Problem> found;
  append_key_literal(literal, 0, result, found);
  if (problems) *problems = found;
  return result;
}

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("id", "idd"), 1u);
  EXPECT_EQ(edit_distance("lease", "leese"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

TEST(EditDistance, SuggestsOnlyLikelyTypos) {
  EXPECT_EQ(closest_match("idd", {"cart", "id"}), "id");
  EXPECT_EQ(closest_match("onbusy", {"lease", "on_busy"}), "on_busy");
  EXPECT_EQ(closest_match("timeout", {"lease", "wait"}), std::nullopt);
  EXPECT_EQ(closest_match("x", {"id"}), std::nullopt);
  EXPECT_EQ(closest_match("id", {"id"}), std::nullopt) << "an exact match is not a typo";
  EXPECT_EQ(closest_match("ab", {"ac", "ad"}), "ac") << "the first of equals wins";
}

TEST(Duration, AcceptsAWholeNumberAndAUnit) {
  EXPECT_EQ(parse_duration("250ms").value, 250ms);
  EXPECT_EQ(parse_duration("30s").value, 30s);
  EXPECT_EQ(parse_duration("10m").value, 10min);
  EXPECT_EQ(parse_duration("1h").value, 1h);
  EXPECT_EQ(parse_duration("0s").value, 0ms);
}

TEST(Duration, SaysWhatIsWrong) {
  EXPECT_EQ(parse_duration("30").error, "missing unit");
  EXPECT_EQ(parse_duration("2d").error, "unknown unit 'd'");
  EXPECT_EQ(parse_duration("1.5s").error, "unknown unit '.5s'");
  EXPECT_EQ(parse_duration("s").error, "a duration starts with a whole number");
  EXPECT_EQ(parse_duration("99999999999999999999h").error, "too large");
  EXPECT_FALSE(parse_duration("30S").value) << "units are lower case, as in YAML";
  EXPECT_FALSE(parse_duration("30'000ms").value);
}

TEST(KeyTemplate, TurnsPlaceholdersIntoFormatFields) {
  const KeyTemplate k = key(R"("order:<id>:<cart.size>")");
  EXPECT_EQ(k.format, "order:{}:{}");
  ASSERT_EQ(k.placeholders.size(), 2u);
  EXPECT_EQ(k.placeholders[0].root, "id");
  EXPECT_EQ(k.placeholders[0].offset, 7u);
  EXPECT_EQ(k.placeholders[0].root_offset, 8u);
  EXPECT_EQ(k.placeholders[0].length, 4u);
  EXPECT_EQ(placeholder_expression(k.placeholders[1], "cart"), "cart.size");
}

TEST(KeyTemplate, ReadsMemberChains) {
  const KeyTemplate k = key(R"("<this->owner.id>/< order -> customer . id >")");
  ASSERT_EQ(k.placeholders.size(), 2u);
  const Placeholder& first = k.placeholders[0];
  EXPECT_EQ(first.root, "this");
  ASSERT_EQ(first.members.size(), 2u);
  EXPECT_EQ(first.members[0].access, Access::kArrow);
  EXPECT_EQ(first.members[0].name, "owner");
  EXPECT_EQ(first.members[1].access, Access::kDot);
  EXPECT_EQ(first.members[1].name_offset, 14u);
  EXPECT_EQ(placeholder_expression(first, "this"), "this->owner.id");
  EXPECT_EQ(placeholder_expression(k.placeholders[1], "o"), "o->customer.id");
}

TEST(KeyTemplate, DoublesAngleBracketsForLiteralsAndBracesForFmt) {
  EXPECT_EQ(key(R"("a<<b>>c")").format, "a<b>c");
  EXPECT_EQ(key(R"("{x}:<<<id>>>")").format, "{{x}}:<{}>");
  EXPECT_EQ(key(R"("{{")").format, "{{{{");
}

TEST(KeyTemplate, DecodesEscapesAsLiteralText) {
  EXPECT_EQ(key(R"("a\"b\\c\n\x41\101\u00e9")").format, "a\"b\\c\nAA\xC3\xA9");
  EXPECT_EQ(key(R"("\x7b")").format, "{{") << "an escaped brace is still a brace to fmt";
  EXPECT_EQ(key(R"("\<")").placeholders.size(), 0u);
}

TEST(KeyTemplate, PointsAtTheColumnOfEachError) {
  std::vector<Problem> problems;
  key(R"("order:<id")", &problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].offset, 7u);
  EXPECT_EQ(problems[0].message,
            "unterminated placeholder in lock key; write '<<' for a literal '<'");

  key(R"("a<>b")", &problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].offset, 2u);
  EXPECT_EQ(problems[0].length, 2u);

  key(R"("a>b")", &problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].offset, 2u);
  EXPECT_EQ(problems[0].fix, ">>");

  key(R"("<a.>")", &problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].offset, 4u);
  EXPECT_EQ(problems[0].message, "expected a member name after '.' in placeholder");

  key(R"("<a-b>")", &problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].offset, 3u);

  key(R"("\q\x")", &problems);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].message, "unknown escape sequence '\\q'");
  EXPECT_EQ(problems[1].message, "incomplete escape sequence");
}

TEST(KeyTemplate, ReportsEveryProblemAndKeepsGoodPlaceholders) {
  std::vector<Problem> problems;
  const KeyTemplate k = key(R"("<>:<id>:>")", &problems);
  EXPECT_EQ(problems.size(), 2u);
  ASSERT_EQ(k.placeholders.size(), 1u);
  EXPECT_EQ(k.placeholders[0].root, "id");
}

TEST(KeyTemplate, RefusesPrefixedLiterals) {
  std::vector<Problem> problems;
  key(R"(u8"order")", &problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].message, "the lock key must be a plain string literal");
}

TEST(StringLiteral, SpellsAnyBytesSafely) {
  EXPECT_EQ(to_string_literal("plain:{}"), "\"plain:{}\"");
  EXPECT_EQ(to_string_literal("q\"b\\"), "\"q\\\"b\\\\\"");
  EXPECT_EQ(to_string_literal("a\n\t1"), "\"a\\012\\0111\"") << "octal escapes end in 3 digits";
  EXPECT_EQ(to_string_literal("\xC3\xA9"), "\"\\303\\251\"");
  EXPECT_EQ(to_string_literal("?\?="), "\"?\\?=\"") << "no trigraph";
}

TEST(GuardParser, ReadsKeyAndEveryOption) {
  const GuardParse p = parse(
      R"("order:<id>", lease=30s, wait=2s, on_busy=skip, min_hold=1m, max_hold=10m, )"
      R"(policy="reports", name="shop::place_order")");
  ASSERT_TRUE(p.problems.empty()) << p.problems[0].message;
  EXPECT_EQ(p.spec.keys.at(0).format, "order:{}");
  EXPECT_EQ(p.spec.options.lease, 30s);
  EXPECT_EQ(p.spec.options.wait, 2s);
  EXPECT_EQ(p.spec.options.on_busy, BusyAction::kSkip);
  EXPECT_EQ(p.spec.options.min_hold, 1min);
  EXPECT_EQ(p.spec.options.max_hold, 10min);
  EXPECT_EQ(p.spec.policy, "reports");
  EXPECT_EQ(p.spec.name, "shop::place_order");
}

TEST(GuardParser, LeavesUnsetOptionsToTheConfiguration) {
  const GuardParse p = parse(R"("k", on_busy=throw)");
  ASSERT_TRUE(p.problems.empty());
  EXPECT_FALSE(p.spec.options.lease);
  EXPECT_FALSE(p.spec.options.wait);
  EXPECT_EQ(p.spec.options.on_busy, BusyAction::kThrow);
  EXPECT_FALSE(p.spec.policy);
}

TEST(GuardParser, ConcatenatesAdjacentLiterals) {
  const GuardParse p = parse(R"("order:" "<id>")");
  ASSERT_TRUE(p.problems.empty());
  ASSERT_EQ(p.spec.keys.size(), 1u);
  EXPECT_EQ(p.spec.keys[0].format, "order:{}");
  EXPECT_EQ(p.spec.keys[0].placeholders[0].root_offset, 11u);
  EXPECT_EQ(p.spec.keys[0].offset, 0u);
  EXPECT_EQ(p.spec.keys[0].length, 15u) << "from the first quote to the last";
}

TEST(GuardParser, SuggestsTheNearestOption) {
  const GuardParse p = parse(R"("k", leese=30s)");
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0].message, "unknown option 'leese'; did you mean 'lease'?");
  EXPECT_EQ(p.problems[0].offset, 5u);
  EXPECT_EQ(p.problems[0].length, 5u);
  EXPECT_EQ(p.problems[0].fix, "lease");
}

TEST(GuardParser, RefusesDuplicatesWithANoteAtTheFirst) {
  const GuardParse p = parse(R"("k", wait=1s, wait=2s)");
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0].message, "duplicate option 'wait'");
  EXPECT_EQ(p.problems[0].offset, 14u);
  ASSERT_EQ(p.problems[0].notes.size(), 1u);
  EXPECT_EQ(p.problems[0].notes[0].offset, 5u);
}

TEST(GuardParser, ChecksValuesAndTheirRelations) {
  EXPECT_EQ(parse(R"("k", lease=0s)").problems.at(0).message, "'lease' must be longer than zero");
  EXPECT_EQ(parse(R"("k", max_hold=0m)").problems.at(0).message,
            "'max_hold' must be longer than zero");
  EXPECT_EQ(parse(R"("k", min_hold=10m, max_hold=1m)").problems.at(0).message,
            "'min_hold' (10m) is longer than 'max_hold' (1m)");
  EXPECT_TRUE(parse(R"("k", min_hold=1m, max_hold=1m)").problems.empty());
  EXPECT_EQ(parse(R"("k", on_busy=wait)").problems.at(0).message,
            "bad value 'wait' for 'on_busy'; expected 'throw' or 'skip'");
  EXPECT_EQ(parse(R"("k", policy=reports)").problems.at(0).message,
            "'policy' takes a string literal");
  EXPECT_EQ(parse(R"("k", name="")").problems.at(0).message, "'name' must not be empty");
  EXPECT_EQ(parse(R"("k", lease=30 s)").problems.at(0).message,
            "bad duration '30 s' for 'lease': not a duration; write a whole number and a unit: "
            "250ms, 30s, 10m, 1h");
}

TEST(GuardParser, ExplainsMalformedArguments) {
  EXPECT_EQ(parse("").problems.at(0).message,
            "missing lock key; e.g. [[dlock::guard(\"order:<id>\")]]");
  EXPECT_EQ(parse("lease=30s").problems.at(0).message,
            "the lock key must be a string literal, e.g. [[dlock::guard(\"order:<id>\")]]");
  EXPECT_EQ(parse(R"("k", )").problems.at(0).message, "expected an option after ','");
  EXPECT_EQ(parse(R"("k", lease)").problems.at(0).message, "expected '=' after 'lease'");
  EXPECT_EQ(parse(R"("k", lease=)").problems.at(0).message, "expected a value for 'lease'");
  EXPECT_EQ(parse(R"("k", 3=4)").problems.at(0).message,
            "expected an option name, one of lease, wait, on_busy, min_hold, max_hold, policy, "
            "name, mode, fair, permits");
}

TEST(GuardParser, ReadsTheLockKind) {
  const GuardParse shared = parse(R"("doc:<id>", mode=shared, fair=true)");
  ASSERT_TRUE(shared.problems.empty()) << shared.problems[0].message;
  EXPECT_EQ(shared.spec.options.mode, ::dlock::LockMode::kShared);
  EXPECT_EQ(shared.spec.options.fair, true);
  EXPECT_FALSE(shared.spec.options.permits);

  const GuardParse permits = parse(R"("export:<region>", mode=exclusive, fair=false, permits=3)");
  ASSERT_TRUE(permits.problems.empty()) << permits.problems[0].message;
  EXPECT_EQ(permits.spec.options.mode, ::dlock::LockMode::kExclusive);
  EXPECT_EQ(permits.spec.options.fair, false);
  EXPECT_EQ(permits.spec.options.permits, 3);
  EXPECT_EQ(parse(R"("k", permits=1000000)").spec.options.permits, 1000000);
  EXPECT_EQ(parse(R"("k", permits=1)").spec.options.permits, 1);

  const GuardParse plain = parse(R"("k")");
  EXPECT_FALSE(plain.spec.options.mode) << "unset: the runtime's default, exclusive";
  EXPECT_FALSE(plain.spec.options.fair);
}

TEST(GuardParser, ChecksTheLockKind) {
  EXPECT_EQ(parse(R"("k", mode=read)").problems.at(0).message,
            "bad value 'read' for 'mode'; expected 'shared' or 'exclusive'");
  const GuardParse typo = parse(R"("k", mode=shard)");
  ASSERT_EQ(typo.problems.size(), 1u);
  EXPECT_EQ(typo.problems[0].message, "bad value 'shard' for 'mode'; did you mean 'shared'?");
  EXPECT_EQ(typo.problems[0].fix, "shared");
  EXPECT_EQ(typo.problems[0].offset, 10u);
  EXPECT_EQ(parse(R"("k", mode="shared")").problems.at(0).fix, std::nullopt);

  EXPECT_EQ(parse(R"("k", fair=yes)").problems.at(0).message,
            "bad value 'yes' for 'fair'; expected 'true' or 'false'");
  EXPECT_EQ(parse(R"("k", fair=ture)").problems.at(0).fix, "true");
  EXPECT_EQ(parse(R"("k", fair=1)").problems.at(0).message,
            "bad value '1' for 'fair'; expected 'true' or 'false'");

  EXPECT_EQ(parse(R"("k", permits=0)").problems.at(0).message, "'permits' must be at least 1");
  EXPECT_EQ(parse(R"("k", permits=-2)").problems.at(0).message, "'permits' must be at least 1");
  EXPECT_EQ(parse(R"("k", permits=1000001)").problems.at(0).message,
            "'permits' must be at most 1000000");
  EXPECT_EQ(parse(R"("k", permits=99999999999999999999999)").problems.at(0).message,
            "'permits' must be at most 1000000");
  for (const char* value : {"x", "3s", "1.5", "0x10", "\"3\"", "- x"}) {
    const GuardParse p = parse(std::string(R"("k", permits=)") + value);
    ASSERT_EQ(p.problems.size(), 1u) << value;
    EXPECT_EQ(p.problems[0].message, std::string("bad value '") + value +
                                         "' for 'permits'; expected a whole number from 1 to "
                                         "1000000");
  }
}

TEST(GuardParser, RefusesPermitsOnASharedLock) {
  const GuardParse p = parse(R"("k", mode=shared, lease=1s, permits=3)");
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0].message,
            "'permits' cannot be used with 'mode=shared': every permit is an exclusive hold");
  EXPECT_EQ(p.problems[0].offset, 28u);
  EXPECT_EQ(p.problems[0].length, 7u);
  ASSERT_EQ(p.problems[0].notes.size(), 1u);
  EXPECT_EQ(p.problems[0].notes[0].offset, 5u);
  EXPECT_EQ(p.problems[0].notes[0].message, "'mode' given here");
  EXPECT_TRUE(parse(R"("k", mode=exclusive, permits=3)").problems.empty());
}

TEST(GuardParser, ReadsSeveralKeysInTheOrderWritten) {
  const GuardParse p = parse(R"("account:<from>", "account:" "<to>", "audit", lease=10s)");
  ASSERT_TRUE(p.problems.empty()) << p.problems[0].message;
  ASSERT_EQ(p.spec.keys.size(), 3u);
  EXPECT_EQ(p.spec.keys[0].placeholders.at(0).root, "from");
  EXPECT_EQ(p.spec.keys[1].format, "account:{}");
  EXPECT_EQ(p.spec.keys[1].placeholders.at(0).root, "to");
  EXPECT_EQ(p.spec.keys[1].offset, 18u);
  EXPECT_EQ(p.spec.keys[1].length, 17u);
  EXPECT_EQ(p.spec.keys[2].format, "audit");
  EXPECT_EQ(p.spec.options.lease, 10s);
}

TEST(GuardParser, RefusesAKeyGivenTwice) {
  const GuardParse p = parse(R"("account:<from>", "account:" "< from >")");
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0].message, "lock key \"account:<from>\" is given twice");
  EXPECT_EQ(p.problems[0].offset, 18u);
  ASSERT_EQ(p.problems[0].notes.size(), 1u);
  EXPECT_EQ(p.problems[0].notes[0].offset, 0u);
  EXPECT_EQ(p.problems[0].notes[0].message, "first given here");
  EXPECT_TRUE(parse(R"("account:<from>", "account:<to>")").problems.empty());
  EXPECT_TRUE(parse(R"("a<<b", "a<b>")").problems.empty()) << "a literal '<' is no placeholder";
}

TEST(GuardParser, ExplainsMisplacedKeys) {
  EXPECT_EQ(parse(R"("a", lease=1s, "b")").problems.at(0).message,
            "a lock key must come before the options");
  EXPECT_EQ(parse(R"("a", "b" c)").problems.at(0).message,
            "the lock key must be a string literal, e.g. [[dlock::guard(\"order:<id>\")]]");
  EXPECT_EQ(parse(R"("a", , "b")").problems.at(0).message, "expected an option after ','");
}

TEST(GuardParser, SuggestsTheNewOptions) {
  EXPECT_EQ(parse(R"("k", mdoe=shared)").problems.at(0).fix, "mode");
  EXPECT_EQ(parse(R"("k", fiar=true)").problems.at(0).fix, "fair");
  EXPECT_EQ(parse(R"("k", permit=3)").problems.at(0).fix, "permits");
  EXPECT_EQ(parse(R"("k", fair=true, fair=false)").problems.at(0).message,
            "duplicate option 'fair'");
}

TEST(KeyTemplate, SpellsItsTextAsOneLiteralWould) {
  EXPECT_EQ(key_text(key(R"("a<< <b . c>{x}>>")")), "a<< <b.c>{x}>>");
  EXPECT_EQ(key_text(key(R"("<this->o>")")), "<this->o>");
}

TEST(GuardParser, ReportsAllProblemsAtOnce) {
  EXPECT_EQ(parse(R"("<", leese=1s, wait=1, on_busy=maybe)").problems.size(), 4u);
}

TEST(AttributeLexer, KeepsOffsetsOfEveryToken) {
  const std::vector<ArgToken> tokens = lex_arguments(R"("k:<id>" , lease = 30s)");
  ASSERT_EQ(tokens.size(), 5u);
  EXPECT_EQ(tokens[0].kind, TokenKind::kString);
  EXPECT_EQ(tokens[0].offset, 0u);
  EXPECT_EQ(tokens[2].kind, TokenKind::kIdentifier);
  EXPECT_EQ(tokens[2].offset, 11u);
  EXPECT_EQ(tokens[4].kind, TokenKind::kNumber);
  EXPECT_EQ(tokens[4].text, "30s") << "a pp-number: digits and unit in one token";
}

// Found by tests/fuzz/guard_fuzzer: an open literal at the end ran into the ')' that
// lex_arguments adds, giving a token that is not in the text.
TEST(AttributeLexer, KeepsAnUnterminatedLiteralInsideTheText) {
  const std::string text = R"("k", name="open)";
  const std::vector<ArgToken> tokens = lex_arguments(text);
  ASSERT_FALSE(tokens.empty());
  const ArgToken& last = tokens.back();
  EXPECT_EQ(last.offset, 10u);
  EXPECT_EQ(last.text, "\"open");
  EXPECT_LE(last.offset + last.text.size(), text.size());
}

}  // namespace
}  // namespace dlock::codegen
