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
  EXPECT_TRUE(contains(flags, "-std=c++2b")) << "clang 14's name for C++23";
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
