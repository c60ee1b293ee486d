// Woven copies of headers shared by the sources of a target.
//
// A header that defines guarded functions is woven into a copy by the parse of a source that
// includes it (include_graph.hpp). Sources that only include it, and call what it defines,
// need the same copy; parsing each of them for it would cost most of a compile. So a parse
// also writes its copies under a directory shared by the target, each under a key that
// digests everything the copy was made from: the generator, the compiler flags, and the path
// and text of the header and of every project header it reaches. A later source whose token
// scan reaches the same headers computes the same keys; when every copy it needs exists, it
// only points its includes at them, without a parse. Any difference (another text, other
// flags, a header reached another way) gives another key, and the source is parsed. A copy
// whose headers had a block skipped by #if (which the including source's macros may decide)
// is never shared.
//
//   std::vector<CopiedFile> files = ...;             // the copied headers and their includes
//   std::string key = copy_key(files, i, generator_context(flags));
//   std::string path = shared_copy_path(dir, key, files[i].path);
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::codegen {

/// A project header the copies reach, with the ones it includes (indices into the same list).
struct CopiedFile {
  std::string path;  ///< absolute path of the original
  std::string_view text;
  std::vector<std::size_t> includes;
};

/// What, besides the headers, decides the content of a copy: this generator (its version and
/// the executable's size and time) and the compiler flags.
[[nodiscard]] std::string generator_context(const std::vector<std::string>& compiler_flags);

/// The key of the copy of `files[file]`: a digest of `context` and of the path and text of
/// every file reachable from it through `includes`, itself included.
[[nodiscard]] std::string copy_key(const std::vector<CopiedFile>& files, std::size_t file,
                                   std::string_view context);

/// `dir/<key>/<file name of original>`.
[[nodiscard]] std::string shared_copy_path(const std::string& dir, std::string_view key,
                                           const std::string& original);

/// The path of a copy not shared (one source's own): `dir/<hash of the original path>/<its
/// name>`, so that the name stays readable in the compiler's "In file included from" lines
/// and two headers of the same name do not meet.
[[nodiscard]] std::string own_copy_path(const std::string& dir, const std::string& original);

}  // namespace dlock::codegen
