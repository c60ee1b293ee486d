// The dlock-codegen program: command line, fast path, clang, outputs.
//
//   dlock-codegen SOURCE -o WOVEN [--depfile D] -- COMPILER_FLAGS...
//
//   int main(int argc, char** argv) { return dlock::codegen::run_main(argc, argv); }
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dlock::codegen {

/// The exit status, as `--help` documents it.
enum ExitCode : int {
  kExitOk = 0,           ///< woven (or passed through); outputs written
  kExitGuardErrors = 1,  ///< errors in guards or in the source were reported; no outputs
  kExitUsage = 2,        ///< bad command line or an input/output error; no outputs
};

/// What the command line asks for.
struct Options {
  std::string source;
  std::string output;
  std::string depfile;  ///< empty: none
  std::vector<std::string> compiler_flags;
  bool full_parse = false;  ///< skip the fast path (for measurements and debugging)
  /// `--header-dir DIR`: woven copies of headers shared by the sources of a target.
  std::string shared_header_dir;
  bool help = false;
  /// `--unwoven-target NAME`: check that the sources of a target that is not woven compile
  /// no guard (none in them, no guarded definition in their project headers); `output` is
  /// then a stamp file written when the check passes.
  std::string unwoven_target;
  std::vector<std::string> more_sources;  ///< the sources after the first, for that check
};

/// Options, or the usage error.
struct CommandLine {
  std::optional<Options> options;
  std::string error;
};

/// Parses the arguments after the program name.
[[nodiscard]] CommandLine parse_command_line(const std::vector<std::string>& args);

/// The `--help` text.
[[nodiscard]] std::string help_text();

/// Runs the generator; returns an ExitCode.
[[nodiscard]] int run(const Options& options);

/// The whole program.
[[nodiscard]] int run_main(int argc, const char* const* argv);

}  // namespace dlock::codegen
