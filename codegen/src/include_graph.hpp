// What the preprocessor did in one translation unit, kept for the weaving of headers: every
// file entered (the depfile), every `#include` with the file it resolved to, the blocks that
// `#if` skipped, and whether a macro mentions dlock.
//
//   IncludeGraph graph;
//   preprocessor.addPPCallbacks(graph.recorder(sources, lang_options));   // before the parse
//   ... parse ...
//   HeaderCopies copies = graph.plan_copies(main, headers_with_bodies, "out/x.cpp.headers");
//
// A project header that defines a guarded function is woven as a copy in the build tree. The
// copy is only reached if every `#include` that leads to it points there: the one in the
// source, and those in the headers on the way (copied too). In a copy, a quoted `#include`
// of a project header is pointed at the original by its absolute path, since the copy no
// longer sits next to the files it includes; angled ones, and those that reach system
// headers, search the same paths from anywhere and stay as written.
#pragma once

#include <clang/Basic/LangOptions.h>
#include <clang/Basic/SourceLocation.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/codegen/attribute_lexer.hpp"
#include "dlock/codegen/weaver.hpp"

namespace clang {
class FileEntry;
class PPCallbacks;
class SourceManager;
}  // namespace clang

namespace dlock::codegen {

using FileKey = const clang::FileEntry*;

/// One file the translation unit read.
struct ReadFile {
  clang::FileID first;  ///< its first inclusion
  std::string path;     ///< absolute
  bool system = false;  ///< found as a system header (-isystem, the compiler's directories)
  std::string_view text;           ///< as clang read it
  std::vector<ByteRange> skipped;  ///< blocks skipped by `#if`, in any inclusion
  std::vector<ByteRange> skipped_first;  ///< those of the first inclusion
};

/// One `#include` (or `#import`, `#include_next`) and the file it resolved to.
struct IncludeDirective {
  FileKey includer = nullptr;  ///< none for `-include` on the command line
  clang::SourceLocation hash;  ///< the `#`
  ByteRange name;              ///< the name with its quotes or brackets, in the includer
  bool computed = false;       ///< `#include MACRO`: no name to replace
  bool angled = false;
  FileKey target = nullptr;
  /// `#include_next`: where its includer was found decides the search, so in a copy it
  /// becomes an `#include` of the file it found. The range of `include_next`.
  std::optional<ByteRange> next_keyword;
};

/// A quoted `__has_include("...")`: in a copy it is pointed at the file it found, as an
/// `#include` is.
struct IncludeProbe {
  FileKey includer = nullptr;
  ByteRange name;  ///< the string literal
  FileKey target = nullptr;
};

/// The copies to write and the edits that make the woven files include them.
struct HeaderCopies {
  std::map<FileKey, std::string> copies;               ///< original -> copy path
  std::set<FileKey> shared;                            ///< copies in the shared directory
  std::map<FileKey, std::vector<TextEdit>> rewrites;   ///< per woven file, the source too
  std::vector<std::pair<clang::SourceLocation, std::string>> problems;  ///< errors
};

class IncludeGraph {
 public:
  /// The callbacks that fill this graph while the preprocessor runs.
  [[nodiscard]] std::unique_ptr<clang::PPCallbacks> recorder(const clang::SourceManager& sources,
                                                             const clang::LangOptions& language);

  /// Every file entered, absolute, in order, once (the source first).
  [[nodiscard]] const std::vector<std::string>& dependencies() const { return dependencies_; }
  /// A macro mentioning `dlock` was defined: guards may be anywhere.
  [[nodiscard]] bool dlock_macro() const { return dlock_macro_; }
  [[nodiscard]] const ReadFile* file(FileKey key) const;
  /// The file read under this absolute path, by any of its spellings.
  [[nodiscard]] FileKey key_of(const std::string& path) const;
  /// Whether `from` includes `to`, directly or through other files.
  [[nodiscard]] bool includes(FileKey from, FileKey to) const;

  /// Plans the copies of `headers` (files holding guarded bodies) and of every header through
  /// which `main` includes one: under `shared_dir` by their keys (header_cache.hpp), when
  /// given and when no `#if` may have shaped them, else under `dir`.
  [[nodiscard]] HeaderCopies plan_copies(FileKey main, const std::set<FileKey>& headers,
                                         const std::string& dir, const std::string& shared_dir,
                                         std::string_view context) const;

 private:
  // The steps of plan_copies. The headers to copy: those with bodies, and whatever includes
  // one of them, up to the source.
  std::set<FileKey> headers_to_copy(FileKey main, const std::set<FileKey>& headers,
                                    HeaderCopies& plan) const;
  // Where each copy goes: shared by its key, or private to this source.
  void place_copies(const std::set<FileKey>& copied, const std::string& dir,
                    const std::string& shared_dir, std::string_view context,
                    HeaderCopies& plan) const;
  // A shared copy that includes a private one becomes private too.
  void unshare_mixed_copies(const std::set<FileKey>& copied, const std::string& dir,
                            HeaderCopies& plan) const;
  // The #include (and __has_include) edits that lead the source and the copies to the copies.
  void point_includes_at_copies(FileKey main, const std::set<FileKey>& copied,
                                HeaderCopies& plan) const;

  friend class IncludeRecorder;
  std::map<FileKey, ReadFile> files_;
  std::map<std::string, FileKey> keys_;
  std::vector<IncludeDirective> directives_;
  std::vector<IncludeProbe> probes_;
  std::vector<std::string> dependencies_;
  bool dlock_macro_ = false;
};

}  // namespace dlock::codegen
