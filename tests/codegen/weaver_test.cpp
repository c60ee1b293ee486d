// Weaving text: the guard code, the #line directives, attribute removal and the BOM.
#include <gtest/gtest.h>

#include <clang/Basic/LangOptions.h>

#include <string>

#include "dlock/codegen/attribute_lexer.hpp"
#include "dlock/codegen/weaver.hpp"

namespace dlock::codegen {
namespace {

using namespace std::chrono_literals;

const clang::LangOptions& cxx20() { return raw_lexing_options(); }

// What the removal of the guard written in `source` leaves.
std::string without_guard(const std::string& source) {
  const std::size_t scope = source.find("dlock");
  const std::size_t name = source.find("guard", scope);
  const AttributeRead read = read_attribute(source, scope, name, cxx20());
  if (!read.syntax) return "problem: " + read.problem->message;
  const ByteRange removal = read.syntax->removal;
  return source.substr(0, removal.begin) + "|" + source.substr(removal.end);
}

GuardCode order_guard() {
  GuardCode code;
  code.name = "shop::place_order";
  code.keys = {{"order:{}", {"id"}}};
  code.attribute = {"/src/orders.cpp", 3};
  return code;
}

TEST(GuardCode, IsOneLineOfPublicRuntimeApi) {
  GuardCode code = order_guard();
  code.options.lease = 30s;
  code.options.on_busy = BusyAction::kThrow;
  EXPECT_EQ(render_guard_code(code),
            "static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite "
            "dlock_site_; dlock_site_.name = \"shop::place_order\"; "
            "dlock_site_.attribute.lease = ::dlock::Millis{30000}; "
            "dlock_site_.attribute.on_busy = ::dlock::OnBusy::kThrow; "
            "dlock_site_.file = __FILE__; dlock_site_.line = 3; return dlock_site_; }(); "
            "::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format(\"order:{}\", (id)));");
}

TEST(GuardCode, ReturnsWhatASkippedCallReturns) {
  GuardCode code = order_guard();
  code.skip = SkipReturn::kVoid;
  EXPECT_NE(render_guard_code(code).find("dlock_site_.skippable = true; "), std::string::npos);
  EXPECT_NE(render_guard_code(code).find("if (!dlock_guard_.entered()) return;"),
            std::string::npos);
  code.skip = SkipReturn::kBool;
  EXPECT_NE(render_guard_code(code).find("return false;"), std::string::npos);
  code.skip = SkipReturn::kOptional;
  EXPECT_NE(render_guard_code(code).find("return ::std::nullopt;"), std::string::npos);
  code.skip = SkipReturn::kNone;
  EXPECT_EQ(render_guard_code(code).find("entered"), std::string::npos);
}

TEST(GuardCode, SpellsNamesPoliciesAndKeysAsLiterals) {
  GuardCode code = order_guard();
  code.name = "a\"b";
  code.policy = "reports";
  code.keys = {{"{{x}}\n", {}}};
  const std::string text = render_guard_code(code);
  EXPECT_NE(text.find("dlock_site_.name = \"a\\\"b\"; dlock_site_.policy = \"reports\"; "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("::fmt::format(\"{{x}}\\012\"))"), std::string::npos) << text;
}

TEST(GuardCode, SetsTheLockKindOnlyWhenTheAttributeGivesIt) {
  GuardCode code = order_guard();
  EXPECT_EQ(render_guard_code(code).find("mode"), std::string::npos);
  EXPECT_EQ(render_guard_code(code).find("fair"), std::string::npos);
  EXPECT_EQ(render_guard_code(code).find("permits"), std::string::npos);

  code.options.max_hold = 1min;
  code.options.mode = ::dlock::LockMode::kShared;
  code.options.fair = true;
  EXPECT_NE(render_guard_code(code).find(
                "dlock_site_.attribute.max_hold = ::dlock::Millis{60000}; "
                "dlock_site_.attribute.mode = ::dlock::LockMode::kShared; "
                "dlock_site_.attribute.fair = true; dlock_site_.file = __FILE__; "),
            std::string::npos)
      << render_guard_code(code);

  code.options.mode = ::dlock::LockMode::kExclusive;
  code.options.fair = false;
  code.options.permits = 3;
  EXPECT_NE(render_guard_code(code).find("dlock_site_.attribute.mode = "
                                         "::dlock::LockMode::kExclusive; "
                                         "dlock_site_.attribute.fair = false; "
                                         "dlock_site_.attribute.permits = 3; "),
            std::string::npos)
      << render_guard_code(code);
}

TEST(GuardCode, PassesSeveralKeysInTheOrderWritten) {
  GuardCode code = order_guard();
  code.keys = {{"account:{}", {"from"}}, {"account:{}", {"to"}}, {"audit", {}}};
  const std::string text = render_guard_code(code);
  const std::string guard =
      "::dlock::Guard dlock_guard_(dlock_guard_site_, ::std::vector<::dlock::Key>{"
      "::fmt::format(\"account:{}\", (from)), ::fmt::format(\"account:{}\", (to)), "
      "::fmt::format(\"audit\")});";
  ASSERT_GE(text.size(), guard.size());
  EXPECT_EQ(text.substr(text.size() - guard.size()), guard) << text;
}

TEST(Weave, KeepsEveryOriginalLineAtItsNumber) {
  const std::string source = "[[dlock::guard(\"order:<id>\")]]\nint f(long id) { return 1; }\n";
  WeaveEdit edit;
  edit.removal = ByteRange{0, 30};
  edit.body_offset = source.find('{') + 1;
  edit.brace = {"/src/orders.cpp", 2};
  edit.code = order_guard();
  edit.code.attribute.line = 1;
  const WeaveResult result = weave_source(source, "/src/orders.cpp", {edit});
  ASSERT_EQ(result.error, "");
  EXPECT_EQ(result.text,
            "#include <dlock/guard.hpp>\n"
            "#include <fmt/core.h>\n"
            "#line 1 \"/src/orders.cpp\"\n"
            "\n"
            "int f(long id) {\n"
            "#line 1 \"/src/orders.cpp\"\n" +
                render_guard_code(edit.code) +
                "\n"
                "#line 2 \"/src/orders.cpp\"\n"
                " return 1; }\n");
}

TEST(Weave, ReportsOverlappingEdits) {
  WeaveEdit edit;
  edit.removal = ByteRange{0, 10};
  edit.body_offset = 5;
  edit.code = order_guard();
  EXPECT_NE(weave_source("0123456789{}", "/x.cpp", {edit}).error, "");
}

TEST(Weave, DropsTheByteOrderMarkThatWouldFollowTheLineDirective) {
  EXPECT_EQ(passthrough_source("\xEF\xBB\xBFint x;\n", "/a b/x.cpp"),
            "#line 1 \"/a b/x.cpp\"\nint x;\n");
  EXPECT_EQ(line_directive(7, "C:\\src\\x.cpp"), "#line 7 \"C:\\\\src\\\\x.cpp\"");
}

TEST(AttributeRemoval, RemovesAWholeSpecifierKeepingItsNewlines) {
  EXPECT_EQ(without_guard("[[dlock::guard(\"k\")]] void f();"), "| void f();");
  EXPECT_EQ(without_guard("[[dlock::guard(\"k\",\n  lease=1s)]]\nvoid f();"),
            "|\nvoid f();");
  EXPECT_EQ(without_guard("[[ using dlock : guard(\"k\") ]] void f();"), "| void f();");
}

TEST(AttributeRemoval, RemovesOnlyTheGuardFromASharedSpecifier) {
  EXPECT_EQ(without_guard("[[nodiscard, dlock::guard(\"k\")]] int f();"),
            "[[nodiscard|]] int f();");
  EXPECT_EQ(without_guard("[[dlock::guard(\"k\"), nodiscard]] int f();"),
            "[[|nodiscard]] int f();");
  EXPECT_EQ(without_guard("[[gnu::cold, dlock::guard(\"k\"), nodiscard]] int f();"),
            "[[gnu::cold|, nodiscard]] int f();");
}

TEST(AttributeRemoval, FindsTheSpecifierPastBracketsInOtherAttributes) {
  EXPECT_EQ(without_guard("int a[2]; [[deprecated(\"[[x]]\"), dlock::guard(\"k\")]] void f();"),
            "int a[2]; [[deprecated(\"[[x]]\")|]] void f();");
}

TEST(AttributeRead, ReadsTheArgumentsAsTokens) {
  const std::string source = "[[dlock::guard(\"k:<id>\", lease=30s)]] void f(int id);";
  const AttributeRead read = read_attribute(source, 2, 9, cxx20());
  ASSERT_TRUE(read.syntax);
  EXPECT_EQ(read.syntax->open_paren, 14u);
  EXPECT_EQ(read.syntax->close_paren, 34u);
  ASSERT_EQ(read.syntax->arguments.size(), 5u);
  EXPECT_EQ(read.syntax->arguments[0].text, "\"k:<id>\"");
  EXPECT_EQ(read.syntax->arguments[0].offset, 15u);
}

TEST(AttributeRead, ExplainsWhatCannotBeRead) {
  const std::string missing_key = "[[dlock::guard]] void f();";
  EXPECT_EQ(read_attribute(missing_key, 2, 9, cxx20()).problem->message,
            "'dlock::guard' needs a lock key, e.g. [[dlock::guard(\"order:<id>\")]]");
  const std::string open = "[[dlock::guard(\"k\", (lease]] void f();";
  EXPECT_EQ(read_attribute(open, 2, 9, cxx20()).problem->message,
            "unbalanced ']' in 'dlock::guard'");
  const std::string eof = "[[dlock::guard(\"k\",";
  EXPECT_EQ(read_attribute(eof, 2, 9, cxx20()).problem->message,
            "unterminated argument list of 'dlock::guard'");
}

}  // namespace
}  // namespace dlock::codegen
