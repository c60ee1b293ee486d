#include "dlock/codegen/compiler_flags.hpp"

#include <clang/Driver/Options.h>
#include <llvm/Option/ArgList.h>
#include <llvm/Option/OptTable.h>
#include <llvm/Option/Option.h>

#include <optional>
#include <set>

namespace dlock::codegen {
namespace {

// `-Ifoo`, `-I foo`, `--include-directory=foo`: the value of one of `spellings`, or nullopt.
// Advances `i` past a separate value.
std::optional<std::string> value_of(const std::vector<std::string>& flags, std::size_t& i,
                                    std::initializer_list<std::string_view> spellings) {
  const std::string& flag = flags[i];
  for (std::string_view spelling : spellings) {
    if (flag.compare(0, spelling.size(), spelling) != 0) continue;
    if (flag.size() > spelling.size()) {
      std::string value = flag.substr(spelling.size());
      if (value.front() == '=' && spelling.substr(0, 2) == "--") value.erase(0, 1);
      return value;
    }
    if (i + 1 < flags.size()) return flags[++i];
    return std::nullopt;
  }
  return std::nullopt;
}

// Options that would make clang do something other than check the source, or write files.
bool is_unwanted(unsigned id) {
  namespace o = clang::driver::options;
  static const std::set<unsigned> kUnwanted{
      o::OPT_UNKNOWN, o::OPT_INPUT, o::OPT_o,  o::OPT_c,  o::OPT_S,  o::OPT_E,
      o::OPT_M,       o::OPT_MM,    o::OPT_MD, o::OPT_MMD, o::OPT_MF, o::OPT_MT,
      o::OPT_MQ,      o::OPT_MP,    o::OPT_MG, o::OPT_fsyntax_only, o::OPT_save_temps,
      o::OPT_save_temps_EQ, o::OPT_emit_ast, o::OPT_emit_llvm, o::OPT__SLASH_Fo};
  return kUnwanted.count(id) != 0;
}

}  // namespace

SearchPaths search_paths_from_flags(const std::vector<std::string>& flags) {
  SearchPaths paths;
  for (std::size_t i = 0; i < flags.size(); ++i) {
    if (flags[i].rfind("-isystem", 0) == 0 || flags[i].rfind("-idirafter", 0) == 0) {
      if (flags[i] == "-isystem" || flags[i] == "-idirafter") ++i;  // skip the value too
      continue;
    }
    if (flags[i].rfind("-include", 0) == 0 && flags[i] != "-include") continue;  // -include-pch
    if (auto dir = value_of(flags, i, {"-iquote"})) {
      paths.quote_dirs.push_back(*dir);
    } else if (auto dir = value_of(flags, i, {"--include-directory", "-I"})) {
      paths.bracket_dirs.push_back(*dir);
    } else if (flags[i] == "-include" || flags[i].rfind("--include=", 0) == 0) {
      if (auto file = value_of(flags, i, {"--include", "-include"})) {
        paths.forced_includes.push_back(*file);
      }
    }
  }
  return paths;
}

std::vector<std::string> clang_flags(const std::vector<std::string>& flags,
                                     std::string_view resource_dir) {
  namespace o = clang::driver::options;
  std::vector<const char*> argv;
  for (const std::string& flag : flags) argv.push_back(flag.c_str());

  const llvm::opt::OptTable& table = clang::driver::getDriverOptTable();
  unsigned missing_index = 0;
  unsigned missing_count = 0;
  // The option set of the gcc-compatible driver, as clang itself parses its command line.
  const llvm::opt::InputArgList args =
      table.ParseArgs(argv, missing_index, missing_count, llvm::opt::Visibility(o::ClangOption));

  std::vector<std::string> out;
  bool has_standard = false;
  bool has_resource_dir = false;
  bool has_language = false;
  for (const llvm::opt::Arg* arg : args) {
    const unsigned id = arg->getOption().getID();
    if (missing_count > 0 && arg->getIndex() == missing_index) continue;  // value missing
    if (is_unwanted(id)) continue;
    has_standard = has_standard || id == o::OPT_std_EQ;
    has_language = has_language || id == o::OPT_x;
    has_resource_dir = has_resource_dir || id == o::OPT_resource_dir ||
                       id == o::OPT_resource_dir_EQ;
    llvm::opt::ArgStringList rendered;
    arg->render(args, rendered);
    for (const char* text : rendered) out.emplace_back(text);
  }
  if (!has_standard) out.emplace_back("-std=gnu++17");  // g++ 12's default
  if (!has_resource_dir) out.push_back("-resource-dir=" + std::string(resource_dir));
  if (!has_language) {
    out.emplace_back("-x");  // whatever its extension, the source is C++
    out.emplace_back("c++");
  }
  out.emplace_back("-w");  // the build compiles the code; only errors matter here
  out.emplace_back("-fsyntax-only");
  return out;
}

}  // namespace dlock::codegen
