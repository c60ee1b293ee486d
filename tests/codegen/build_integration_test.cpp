// What the build sees of the generator: its command line, compiler flags, the fast path's
// scan, depfiles and atomic outputs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dlock/codegen/compiler_flags.hpp"
#include "dlock/codegen/depfile.hpp"
#include "dlock/codegen/driver.hpp"
#include "dlock/codegen/fast_path.hpp"
#include "dlock/codegen/files.hpp"

namespace dlock::codegen {
namespace {
namespace fs = std::filesystem;

// A scratch directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("dlock-codegen-test-" + std::to_string(::getpid()) + "-" +
                                                 std::to_string(counter_++))) {
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path file = path_ / name;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// The flags as one line, to find options whatever their rendering (`-Ix` or `-I x`).
std::string joined(const std::vector<std::string>& flags) {
  std::string line;
  for (const std::string& flag : flags) line += flag + " ";
  return line;
}

TEST(CommandLine, ReadsSourceOutputDepfileAndFlags) {
  const CommandLine c =
      parse_command_line({"a.cpp", "-o", "out/a.cpp", "--depfile=out/a.d", "--", "-Iinc", "-o", "x"});
  ASSERT_TRUE(c.options) << c.error;
  EXPECT_EQ(c.options->source, "a.cpp");
  EXPECT_EQ(c.options->output, "out/a.cpp");
  EXPECT_EQ(c.options->depfile, "out/a.d");
  EXPECT_EQ(c.options->compiler_flags, (std::vector<std::string>{"-Iinc", "-o", "x"}));
}

TEST(CommandLine, RefusesIncompleteOrUnknownArguments) {
  EXPECT_EQ(parse_command_line({"a.cpp"}).error, "no output given (-o WOVEN)");
  EXPECT_EQ(parse_command_line({"-o", "x"}).error, "no SOURCE given");
  EXPECT_EQ(parse_command_line({"a.cpp", "-o"}).error, "missing value after '-o'");
  EXPECT_EQ(parse_command_line({"a.cpp", "-o", "x", "-Iinc"}).error,
            "unknown option '-Iinc' (compiler flags go after '--')");
  EXPECT_EQ(parse_command_line({"a.cpp", "b.cpp", "-o", "x"}).error,
            "more than one source: 'a.cpp' and 'b.cpp'");
  EXPECT_EQ(parse_command_line({"a.cpp", "-o", "a.cpp"}).error,
            "SOURCE, WOVEN and DEPFILE must be different files");
  EXPECT_TRUE(parse_command_line({"--help"}).options->help);
}

TEST(HelpText, DocumentsTheExitStatus) {
  const std::string help = help_text();
  EXPECT_NE(help.find("usage: dlock-codegen SOURCE -o WOVEN"), std::string::npos);
  EXPECT_NE(help.find("--depfile"), std::string::npos);
  EXPECT_NE(help.find("Exit status:\n  0 "), std::string::npos);
  EXPECT_NE(help.find("\n  1 "), std::string::npos);
  EXPECT_NE(help.find("\n  2 "), std::string::npos);
}

TEST(CompilerFlags, FindsTheProjectSearchPath) {
  const SearchPaths paths = search_paths_from_flags(
      {"-Iinc", "-I", "other", "-iquote", "q", "-iquoteq2", "-isystem", "sys", "-isystemsys2",
       "-include", "pre.h", "--include-directory=d", "-DX=1", "-include-pch", "p.pch"});
  EXPECT_EQ(paths.bracket_dirs, (std::vector<std::string>{"inc", "other", "d"}));
  EXPECT_EQ(paths.quote_dirs, (std::vector<std::string>{"q", "q2"}));
  EXPECT_EQ(paths.forced_includes, (std::vector<std::string>{"pre.h"}));
}

TEST(CompilerFlags, GivesClangOnlyWhatItKnows) {
  const std::vector<std::string> flags = clang_flags(
      {"-Iinc", "-DNDEBUG", "-fconcepts-diagnostics-depth=3", "-Wduplicated-branches", "-O2",
       "-c", "-o", "x.o", "-MD", "-MF", "x.d", "stray.cpp", "-std=c++23"},
      "/res");
  EXPECT_NE(joined(flags).find("-I inc "), std::string::npos) << joined(flags);
  EXPECT_NE(joined(flags).find("-D NDEBUG "), std::string::npos) << joined(flags);
  EXPECT_TRUE(contains(flags, "-std=c++23"));
  EXPECT_FALSE(contains(flags, "-fconcepts-diagnostics-depth=3")) << "g++ only";
  EXPECT_FALSE(contains(flags, "-c"));
  EXPECT_FALSE(contains(flags, "x.o"));
  EXPECT_FALSE(contains(flags, "-MD"));
  EXPECT_FALSE(contains(flags, "x.d"));
  EXPECT_FALSE(contains(flags, "stray.cpp"));
  EXPECT_TRUE(contains(flags, "-resource-dir=/res"));
  EXPECT_TRUE(contains(flags, "-w"));
  EXPECT_TRUE(contains(flags, "-fsyntax-only"));
}

TEST(CompilerFlags, DefaultsToTheStandardOfGcc12) {
  EXPECT_TRUE(contains(clang_flags({}, "/res"), "-std=gnu++17"));
  EXPECT_FALSE(contains(clang_flags({"-std=c++20"}, "/res"), "-std=gnu++17"));
  EXPECT_FALSE(contains(clang_flags({"-resource-dir", "/mine"}, "/res"), "-resource-dir=/res"));
}

TEST(FastPath, SeesGuardsOutsideCommentsOnly) {
  EXPECT_TRUE(mentions_guard("[[dlock::guard(\"k\")]] void f();"));
  EXPECT_TRUE(mentions_guard("[[dlock :: guard(\"k\")]] void f();"));
  EXPECT_TRUE(mentions_guard("[[using dlock: nodiscard, guard(\"k\")]] int f();"));
  EXPECT_FALSE(mentions_guard("// [[dlock::guard(\"k\")]]\n/* dlock::guard */ int x;"));
  EXPECT_FALSE(mentions_guard("dlock::Guard g; guard(); dlock::lease();"));
  EXPECT_FALSE(mentions_guard("[[using dlock: other]] int guard;"));
}

TEST(FastPath, FollowsProjectHeadersButNotSystemOnes) {
  TempDir dir;
  const std::string source = dir.write("src/a.cpp", "#include \"b.hpp\"\n#include <vector>\n");
  dir.write("src/b.hpp", "#include <lib/c.hpp>\n");
  const std::string c = dir.write("inc/lib/c.hpp", "#pragma once\n");
  dir.write("sys/lib/d.hpp", "[[dlock::guard(\"k\")]] void f();\n");
  const SearchPaths paths{{}, {(dir.path() / "inc").string()}, {}};
  IncludeScan scan = scan_for_guards(source, "#include \"b.hpp\"\n#include <vector>\n", paths);
  EXPECT_TRUE(scan.conclusive);
  EXPECT_FALSE(scan.guard_found);
  EXPECT_EQ(scan.files.size(), 3u);
  EXPECT_EQ(scan.files.back(), c);

  dir.write("inc/lib/c.hpp", "[[dlock::guard(\"k\")]] void f();\n");
  scan = scan_for_guards(source, "#include \"b.hpp\"\n", paths);
  EXPECT_TRUE(scan.guard_found);
}

TEST(FastPath, GivesUpOnComputedIncludes) {
  TempDir dir;
  const std::string source = dir.write("a.cpp", "#include HEADER\n");
  const IncludeScan scan = scan_for_guards(source, "#include HEADER\n", {});
  EXPECT_FALSE(scan.conclusive);
}

TEST(FastPath, SurvivesIncludeCycles) {
  TempDir dir;
  const std::string source = dir.write("a.cpp", "#include \"a.hpp\"\n");
  dir.write("a.hpp", "#include \"b.hpp\"\n");
  dir.write("b.hpp", "#include \"a.hpp\"\n");
  const IncludeScan scan = scan_for_guards(source, "#include \"a.hpp\"\n", {});
  EXPECT_TRUE(scan.conclusive);
  EXPECT_EQ(scan.files.size(), 3u);
}

// A header whose guards are on declarations; the sources below include it.
constexpr const char* kGuardedApi = R"(#pragma once
#include <string>
namespace ns {
class Cls {
 public:
  [[dlock::guard("cls:<id>")]] void f(int id) const;
  [[dlock::guard("cls:<id>")]] int operator()(int id);
};
[[dlock::guard("free:<name>")]]
bool g(const std::string& name);
}  // namespace ns
)";

// Whether a source including kGuardedApi (and, if given, a second project header) is parsed.
bool needs_parse(const std::string& source_text, const std::string& other_header = "") {
  TempDir dir;
  dir.write("api.hpp", kGuardedApi);
  dir.write("other.hpp", other_header);
  const std::string text = "#include \"api.hpp\"\n#include \"other.hpp\"\n" + source_text;
  const std::string source = dir.write("a.cpp", text);
  const IncludeScan scan = scan_for_guards(source, text, {});
  EXPECT_TRUE(scan.conclusive);
  EXPECT_TRUE(scan.guard_found);
  return scan.needs_parse();
}

// What the scan makes of a source that reaches a header with a guard by an unusual include.
IncludeScan scan_with_guarded_header(const std::string& source_text) {
  TempDir dir;
  dir.write("guarded.hpp", "#pragma once\n[[dlock::guard(\"k\")]] inline void f() {}\n");
  const std::string source = dir.write("a.cpp", source_text);
  return scan_for_guards(source, source_text, {});
}

TEST(FastPath, FollowsADigraphInclude) {
  const IncludeScan scan = scan_with_guarded_header("%:include \"guarded.hpp\"\n");
  EXPECT_TRUE(scan.guard_found);
  EXPECT_TRUE(scan.needs_parse());
}

TEST(FastPath, GivesUpOnIncludesItCannotFollow) {
  // A directive name spelled across a line splice, and #include_next (its search depends on
  // where the includer was found): the parse decides.
  EXPECT_FALSE(scan_with_guarded_header("#inc\\\nlude \"guarded.hpp\"\n").conclusive);
  EXPECT_FALSE(scan_with_guarded_header("#include_next <guarded.hpp>\n").conclusive);
  EXPECT_TRUE(scan_with_guarded_header("#include_next <guarded.hpp>\n").needs_parse());
}

TEST(FastPath, ParsesASourceThatMayDefineAHeaderGuardedFunction) {
  // Out of line by its qualified name, inside its namespace, or through a namespace alias.
  EXPECT_TRUE(needs_parse("void ns::Cls::f(int id) const { (void)id; }\n"));
  EXPECT_TRUE(needs_parse("namespace ns {\nvoid Cls::f(int id) const {}\n}\n"));
  EXPECT_TRUE(needs_parse("namespace ns {\nbool g(const std::string& n) { return n.empty(); }\n}\n"));
  EXPECT_TRUE(needs_parse("namespace a = ns;\nbool a::g(const std::string&) { return true; }\n"));
  EXPECT_TRUE(needs_parse("int ns::Cls::operator()(int id) { return id; }\n"));
  // Declarator shapes: parenthesised, trailing return type, attributes, macros around the body.
  EXPECT_TRUE(needs_parse("bool (ns::g)(const std::string&) { return true; }\n"));
  EXPECT_TRUE(needs_parse("bool (ns::g(const std::string&)) { return true; }\n"));
  EXPECT_TRUE(needs_parse("auto ns::g(const std::string&) -> bool { return true; }\n"));
  EXPECT_TRUE(needs_parse("bool ns::g [[gnu::cold]] (const std::string&) { return true; }\n"));
  EXPECT_TRUE(needs_parse("#define BODY { return true; }\nbool ns::g(const std::string&) BODY\n"));
  EXPECT_TRUE(needs_parse("bool ns::g(const std::string&) <% return true; %>\n"));
  EXPECT_TRUE(needs_parse("bool ns::g(const std::string&) try { return true; } catch (...) { return false; }\n"));
  // The name from a macro, or spelled by pasting.
  EXPECT_TRUE(needs_parse("#define DEFINE(name) bool ns::name(const std::string&) { return true; }\nDEFINE(g)\n"));
  EXPECT_TRUE(needs_parse("#define G g\nbool ns::G(const std::string&) { return true; }\n"));
  EXPECT_TRUE(needs_parse("#define CAT(a, b) a##b\nbool ns::CAT(g, )(const std::string&) { return true; }\n"));
  EXPECT_TRUE(needs_parse("int ns::Cls::oper\\\nator()(int id) { return id; }\n"));
  // Brackets out of kind: nothing after them counts as a use.
  EXPECT_TRUE(needs_parse("int x = (1];\nvoid use() { ns::g(\"a\"); }\n"));
  // Braces a macro opens or closes.
  EXPECT_TRUE(needs_parse("#define OPEN {\nvoid h() OPEN }\n}\n"));
  // A quoted include found nowhere (generated later?) could define one.
  EXPECT_TRUE(needs_parse("#include \"not_generated_yet.hpp\"\n"));
  // Defined inline in another project header.
  EXPECT_TRUE(needs_parse("", "#pragma once\n#include \"api.hpp\"\ninline bool ns::g(const std::string&) { return true; }\n"));
}

TEST(FastPath, ParsesWhenAHeaderGuardIsNotOnAPlainDeclaration) {
  TempDir dir;
  const std::string text = "#include \"api.hpp\"\nvoid use() { h(); }\n";
  const std::string source = dir.write("a.cpp", text);
  for (const std::string header :
       {"[[dlock::guard(\"k\")]] inline void h() {}\n",          // a definition in a header
        "struct S { [[dlock::guard(\"k\")]] virtual void h() = 0; };\n",
        "#define GUARDED [[dlock::guard(\"k\")]]\nGUARDED void h();\n",
        "[[dlock::guard(\"k\")]] int x;\n"}) {
    dir.write("api.hpp", header);
    EXPECT_TRUE(scan_for_guards(source, text, {}).needs_parse()) << header;
  }
}

TEST(FastPath, CopiesASourceThatOnlyUsesHeaderGuardedFunctions) {
  EXPECT_FALSE(needs_parse(""));
  EXPECT_FALSE(needs_parse(
      "int use(const ns::Cls& c, ns::Cls* p, const std::string& n) {\n"
      "  c.f(1);\n"
      "  p->f(2);\n"
      "  (*p)(3);\n"
      "  if (ns::g(n)) { return 1; }\n"
      "  while (!ns::g(n + \"x\") && n.size() > 2) { break; }\n"
      "  const bool ok = ns::g(n);\n"
      "  std::string s = std::to_string(ns::g(n)) + \"!\";\n"
      "  return ok && ns::g(n) ? 2 : p->operator()(4);\n"
      "}\n"));
  // A redeclaration, even with qualifiers, defines nothing.
  EXPECT_FALSE(needs_parse("", "#pragma once\nnamespace ns { bool g(const std::string& name); }\n"));
}

TEST(Depfile, EscapesWhatMakeWouldMisread) {
  EXPECT_EQ(escape_make_path("/a b/c#d$e"), "/a\\ b/c\\#d$$e");
  EXPECT_EQ(make_depfile("out/x.cpp", {"/src/x.cpp", "/src/y z.h"}),
            "out/x.cpp: \\\n  /src/x.cpp \\\n  /src/y\\ z.h\n");
}

TEST(Files, WriteAtomicallyAndCreateDirectories) {
  TempDir dir;
  const std::string path = (dir.path() / "deep/er/out.cpp").string();
  std::string error;
  ASSERT_TRUE(write_file_atomically(path, "one", error)) << error;
  ASSERT_TRUE(write_file_atomically(path, "two", error)) << error;
  std::string content;
  ASSERT_TRUE(read_file(path, content, error));
  EXPECT_EQ(content, "two");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path() / "deep/er"), fs::directory_iterator()),
            1) << "no temporary file left behind";
  remove_file(path);
  remove_file(path);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(read_file(dir.path().string(), content, error));
}

}  // namespace
}  // namespace dlock::codegen
