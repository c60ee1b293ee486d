#include "dlock/codegen/driver.hpp"

#include <clang/Basic/Version.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/raw_ostream.h>

#include <map>
#include <set>

#include "dlock/codegen/compiler_flags.hpp"
#include "dlock/codegen/depfile.hpp"
#include "dlock/codegen/fast_path.hpp"
#include "dlock/codegen/files.hpp"
#include "dlock/codegen/header_cache.hpp"
#include "dlock/codegen/weaver.hpp"
#include "parse.hpp"

namespace dlock::codegen {
namespace {

constexpr const char* kUsage =
    "usage: dlock-codegen SOURCE -o WOVEN [--depfile DEPFILE] [--header-dir DIR] [--full-parse]\n"
    "                     -- COMPILER_FLAGS...\n"
    "       dlock-codegen --unwoven-target NAME SOURCE... -o STAMP [--depfile DEPFILE] -- "
    "COMPILER_FLAGS...";

// `--name=value` or `--name value`; advances `i` past a separate value.
std::optional<std::string> option_value(const std::vector<std::string>& args, std::size_t& i,
                                        const std::string& name, std::string& error) {
  const std::string& arg = args[i];
  if (arg == name) {
    if (i + 1 >= args.size()) {
      error = "missing value after '" + name + "'";
      return std::nullopt;
    }
    return args[++i];
  }
  if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
  return std::nullopt;
}

int usage_error(const std::string& message) {
  llvm::errs() << "dlock-codegen: error: " << message << "\n" << kUsage << "\n"
               << "Run 'dlock-codegen --help' for more.\n";
  return kExitUsage;
}

// Woven copies of headers live next to WOVEN, one directory per source.
std::string header_dir(const Options& options) { return options.output + ".headers"; }

void remove_outputs(const Options& options) {
  remove_file(options.output);
  if (!options.depfile.empty()) remove_file(options.depfile);
  remove_tree(header_dir(options));
}

// The headers first: WOVEN exists only when everything it includes does. A shared copy that
// exists already is the same text (its key says so) and is left as it is, so that sources
// compiled against it are not compiled again. The copies are dependencies too: one that
// disappears makes the build run the generator again.
int write_outputs(const Options& options, const std::string& woven,
                  std::vector<std::string> dependencies,
                  const std::vector<WovenHeader>& headers = {}) {
  std::string error;
  bool written = true;
  for (const WovenHeader& header : headers) {
    dependencies.push_back(header.path);
    written = written && (header.shared ? write_file_if_absent(header.path, header.text, error)
                                        : write_file_atomically(header.path, header.text, error));
  }
  if (!written || !write_file_atomically(options.output, woven, error) ||
      (!options.depfile.empty() &&
       !write_file_atomically(options.depfile, make_depfile(options.output, dependencies),
                              error))) {
    remove_outputs(options);
    llvm::errs() << "dlock-codegen: error: " << error << "\n";
    return kExitUsage;
  }
  return kExitOk;
}

// Parses with clang and weaves.
WeaveOutcome weave_with_clang(const Options& options) {
  return parse_and_weave(options.source,
                         clang_flags(options.compiler_flags, DLOCK_CLANG_RESOURCE_DIR),
                         {absolute_path(header_dir(options)),
                          options.shared_header_dir.empty()
                              ? std::string()
                              : absolute_path(options.shared_header_dir),
                          generator_context(options.compiler_flags)});
}
// The fast path of a source whose project headers define guarded functions and which, as
// far as a token scan shows, only includes them: when the shared copies that the parse of
// another source made (same headers, flags and generator) are all there, the source's
// includes are pointed at them. Nothing when a parse is needed.
std::optional<std::string> woven_from_shared_copies(const Options& options,
                                                    const IncludeScan& scan,
                                                    const std::string& source,
                                                    std::vector<std::string>& copies) {
  if (options.shared_header_dir.empty() || scan.defining_headers.empty()) return std::nullopt;
  // The headers to copy: those that define guards, and every header that includes one.
  std::set<std::size_t> copied(scan.defining_headers.begin(), scan.defining_headers.end());
  std::vector<std::size_t> pending(copied.begin(), copied.end());
  while (!pending.empty()) {
    const std::size_t target = pending.back();
    pending.pop_back();
    for (const ScannedInclude& include : scan.includes) {
      if (include.target != target || include.includer == 0) continue;
      if (include.includer == ScannedInclude::kCommandLine) return std::nullopt;
      if (copied.insert(include.includer).second) pending.push_back(include.includer);
    }
  }
  // The keys digest every project file the copies reach, as the parse's do (include_graph).
  std::vector<std::size_t> order;  // the copied headers first
  std::map<std::size_t, std::size_t> position;
  std::vector<CopiedFile> files;
  auto add_file = [&](std::size_t index) {
    position.emplace(index, files.size());
    order.push_back(index);
    files.push_back({scan.files[index], scan.texts[index], {}});
  };
  for (const std::size_t index : copied) add_file(index);
  for (std::size_t next = 0; next < files.size(); ++next) {
    for (const ScannedInclude& include : scan.includes) {
      if (include.includer != order[next]) continue;
      if (!position.count(include.target)) add_file(include.target);
      files[next].includes.push_back(position[include.target]);
    }
  }
  const std::string context = generator_context(options.compiler_flags);
  const std::string dir = absolute_path(options.shared_header_dir);
  std::map<std::size_t, std::string> paths;
  for (std::size_t i = 0; i < copied.size(); ++i) {
    std::string path = shared_copy_path(dir, copy_key(files, i, context), files[i].path);
    if (!llvm::sys::fs::exists(path)) return std::nullopt;
    copies.push_back(path);
    paths.emplace(order[i], std::move(path));
  }
  std::vector<TextEdit> rewrites;
  for (const ScannedInclude& include : scan.includes) {
    if (include.includer != 0 || !copied.count(include.target)) continue;
    const std::string& path = paths[include.target];
    if (path.find_first_of("\"\n") != std::string::npos) return std::nullopt;
    rewrites.push_back({include.name, "\"" + path + "\""});
  }
  WeaveResult result = weave_source(scan.texts.front(), source, {}, rewrites);
  if (!result.error.empty()) return std::nullopt;  // the parse will say what is wrong
  return std::move(result.text);
}

}  // namespace

CommandLine parse_command_line(const std::vector<std::string>& args) {
  CommandLine result;
  Options options;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string error;
    if (arg == "--") {
      options.compiler_flags.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg == "-h" || arg == "--help") {
      options.help = true;
    } else if (arg == "--full-parse") {
      options.full_parse = true;
    } else if (arg == "-o") {
      if (i + 1 >= args.size()) {
        result.error = "missing value after '-o'";
        return result;
      }
      options.output = args[++i];
    } else if (auto output = option_value(args, i, "--output", error)) {
      options.output = *output;
    } else if (auto depfile = option_value(args, i, "--depfile", error)) {
      options.depfile = *depfile;
    } else if (auto dir = option_value(args, i, "--header-dir", error)) {
      options.shared_header_dir = *dir;
    } else if (auto target = option_value(args, i, "--unwoven-target", error)) {
      options.unwoven_target = *target;
    } else if (!error.empty()) {
      result.error = error;
      return result;
    } else if (arg.size() > 1 && arg[0] == '-') {
      result.error = "unknown option '" + arg + "' (compiler flags go after '--')";
      return result;
    } else if (!options.source.empty()) {
      options.more_sources.push_back(arg);
    } else {
      options.source = arg;
    }
  }
  if (!options.help) {
    if (options.source.empty()) result.error = "no SOURCE given";
    else if (options.output.empty()) result.error = "no output given (-o WOVEN)";
    else if (options.depfile == options.output || options.output == options.source) {
      result.error = "SOURCE, WOVEN and DEPFILE must be different files";
    } else if (!options.more_sources.empty() && options.unwoven_target.empty()) {
      result.error = "more than one source: '" + options.source + "' and '" +
                     options.more_sources.front() + "'";
    }
    if (!result.error.empty()) return result;
  }
  result.options = std::move(options);
  return result;
}

// What --help prints after the usage line.
constexpr std::string_view kHelpDetails = R"(

Weaves the [[dlock::guard(...)]] attributes of the C++ source file SOURCE into calls of the
dlock runtime and writes the result to WOVEN, which the build compiles instead of SOURCE.
#line directives keep the original file name and line numbers, so compiler errors,
debuggers, __FILE__ and __LINE__ point at SOURCE.

Arguments:
  SOURCE               the C++ source file to weave
  -o, --output WOVEN   the file to write; missing parent directories are created
  --depfile DEPFILE    also write a Make-syntax depfile, "WOVEN: SOURCE HEADERS...", listing
                       every file the source includes (Ninja and Make re-run the generator
                       when one changes)
  --header-dir DIR     a directory shared by the sources of one target (dlock_weave passes
                       one): woven copies of headers that define guarded functions are kept
                       there by a digest of their texts, the flags and the generator, so that
                       a source that only includes such headers uses the copies another
                       source's parse made, without a parse of its own
  --full-parse         always parse with clang, even when no guard is mentioned (for
                       debugging and measurements)
  --unwoven-target NAME
                       instead of weaving, check the sources (any number) of a target that
                       is not woven: none may have a guard or include a project header with
                       a guarded definition, which would be compiled there without its lock;
                       writes an empty stamp file as WOVEN when the check passes
  -h, --help           print this help
  -- COMPILER_FLAGS    the flags SOURCE is compiled with: -I, -isystem, -iquote, -D, -U,
                       -std=..., -include, ... Flags clang does not know (g++-only ones)
                       are dropped, warnings are off, and without -std the standard is
                       gnu++17, g++ 12's default. Relative paths are taken from the current
                       directory.

How it works:
  Fast path: when neither SOURCE nor the headers it includes from the project (found from
  the including file's directory, -iquote and -I; -isystem and the compiler's own
  directories are not read) mention dlock::guard outside comments, WOVEN is SOURCE behind
  a '#line 1' directive, written without parsing; the depfile lists the files read.

  Otherwise clang parses SOURCE. Every guard is checked: its arguments (DESIGN.md §1),
  each placeholder against the parameters and members, on_busy=skip against the return
  type (void, bool or std::optional<T>), and the function itself. Guards are refused on
  constructors, destructors, constexpr and consteval functions, coroutines, lambdas,
  deleted or defaulted functions, pure virtual functions without a body, function-try-
  blocks, and on definitions in system headers. A guard on a declaration in a header is
  woven where its definition is: in SOURCE, or in another source that includes the
  header. The guard's code goes at the top of the function body; the attribute is
  removed. Errors print as clang's, file:line:col: error: ..., naming the original file.

  A guarded definition in a project header (inline, in a class body, a template) is
  woven into a copy of the header, WOVEN.headers/... or DIR/... with --header-dir, which
  keeps the original's name and lines with #line; the #include in SOURCE, and in every
  header on the way, names the copy instead. A source that only includes such headers
  uses the copies in DIR that another source's parse made for the same header texts,
  flags and generator, without a parse.

  WOVEN includes <dlock/guard.hpp> and <fmt/core.h>: compile it with the dlock runtime's
  include directory, and with -iquote DIR (DIR being SOURCE's directory) so that
  #include "..." still finds SOURCE's neighbours from WOVEN's directory.

  Outputs are written atomically (temporary file and rename) and only on success; on
  failure WOVEN and DEPFILE are removed, so no stale output remains.

Exit status:
  0  WOVEN (and DEPFILE) written
  1  errors in the guards, or in SOURCE as clang parses it, were reported; nothing written
  2  bad command line, or a file could not be read or written; nothing written
)";

std::string help_text() { return std::string(kUsage) + std::string(kHelpDetails); }

// A target that is not woven must not compile a guard: not in its sources, and not in a
// definition in the project headers they include (an inline function or a template compiled
// there would run without its lock). The fast path's scan decides; it errs towards "may
// define", so a source it cannot clear is reported, and weaving the target is the way out.
int check_unwoven(const Options& options) {
  std::vector<std::string> sources{options.source};
  sources.insert(sources.end(), options.more_sources.begin(), options.more_sources.end());
  const SearchPaths paths = search_paths_from_flags(options.compiler_flags);
  std::vector<std::string> dependencies;
  int status = kExitOk;
  for (const std::string& name : sources) {
    std::string text;
    std::string error;
    if (!read_file(name, text, error)) {
      llvm::errs() << "dlock-codegen: error: " << error << "\n";
      return kExitUsage;
    }
    const std::string source = absolute_path(name);
    const IncludeScan scan = scan_for_guards(source, text, paths);
    dependencies.insert(dependencies.end(), scan.files.begin(), scan.files.end());
    if (!scan.conclusive) {
      status = kExitGuardErrors;
      llvm::errs() << source << ": error: target '" << options.unwoven_target
                   << "' compiles this source without weaving it, and a token scan cannot "
                      "follow all of its includes (#include of a macro, #include_next, a "
                      "directive spelled across lines), so it may compile a dlock guard "
                      "without its lock: call dlock_weave("
                   << options.unwoven_target
                   << "), or set its property DLOCK_SKIP_WEAVE_CHECK if it uses no guarded "
                      "header\n";
      continue;
    }
    if (!scan.guard_found || scan.only_used) continue;
    status = kExitGuardErrors;
    for (const std::string& file : scan.guard_files) {
      llvm::errs() << source << ": error: target '" << options.unwoven_target
                   << "' compiles this source without weaving it, and "
                   << (file == source ? std::string("it has dlock guards")
                                      : "it includes '" + file + "', which has dlock guards")
                   << " that may be defined here; they would run without their locks: "
                   << "call dlock_weave(" << options.unwoven_target << ")\n";
    }
  }
  if (status != kExitOk) return status;
  return write_outputs(options, "", dependencies);
}

int run(const Options& options) {
  // Whatever happens next, no earlier output may pass for this run's.
  remove_outputs(options);
  if (!options.unwoven_target.empty()) return check_unwoven(options);
  std::string text;
  std::string error;
  if (!read_file(options.source, text, error)) {
    llvm::errs() << "dlock-codegen: error: " << error << "\n";
    return kExitUsage;
  }
  const std::string source = absolute_path(options.source);
  if (!options.full_parse) {
    const IncludeScan scan =
        scan_for_guards(source, text, search_paths_from_flags(options.compiler_flags));
    if (!scan.needs_parse()) {
      return write_outputs(options, passthrough_source(text, source), scan.files);
    }
    std::vector<std::string> copies;
    if (auto woven = woven_from_shared_copies(options, scan, source, copies)) {
      std::vector<std::string> dependencies = scan.files;
      dependencies.insert(dependencies.end(), copies.begin(), copies.end());
      return write_outputs(options, *woven, std::move(dependencies));
    }
  }
  WeaveOutcome outcome = weave_with_clang(options);
  if (!outcome.woven) {
    remove_outputs(options);
    if (outcome.clang_errors) {
      llvm::errs() << "dlock-codegen: note: the generator parses " << options.source
                   << " with Clang " << CLANG_VERSION_MAJOR
                   << "; if your compiler accepts it, the construct may be one Clang and g++ "
                      "disagree on: see 'Clang and g++' in dlock's docs/GUARD.md\n";
    }
    return kExitGuardErrors;
  }
  return write_outputs(options, *outcome.woven, outcome.dependencies, outcome.headers);
}

int run_main(int argc, const char* const* argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const CommandLine command_line = parse_command_line(args);
  if (!command_line.options) return usage_error(command_line.error);
  if (command_line.options->help) {
    llvm::outs() << help_text();
    return kExitOk;
  }
  return run(*command_line.options);
}

}  // namespace dlock::codegen
