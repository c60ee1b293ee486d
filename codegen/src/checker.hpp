// Checks every written guard against the function it is on and plans the weaving.
//
//   GuardChecker checker(context);
//   std::vector<WeaveEdit> edits = checker.check(collector.guards());
//   // errors went to clang's DiagnosticsEngine: file:line:col, caret, fix-it, notes
//
// One guard = the attribute's grammar (guard_parser), then the function's shape (not a
// constructor, not constexpr, not a coroutine, ...; the definition in this file), then each
// placeholder against the parameters and the member chain against the record types, then the
// return type against on_busy=skip; then, over all of them, exclusive guards called inside
// shared ones on the same key (upgrade_check). Every problem is reported; nothing is silently
// dropped.
#pragma once

#include <vector>

#include "dlock/codegen/weaver.hpp"
#include "guard_attribute.hpp"

#include <clang/Basic/SourceLocation.h>

#include <string>

namespace clang {
class ASTContext;
class SourceManager;
}  // namespace clang

namespace dlock::codegen {

/// The absolute path of a file clang read; empty for one without a file (a buffer).
[[nodiscard]] std::string path_of(const clang::SourceManager& sources, clang::FileID file);

/// Checks guards and plans the edits of the source and of the headers that define guards.
class GuardChecker {
 public:
  explicit GuardChecker(clang::ASTContext& context);

  /// Reports every error through the context's diagnostics; returns the edits for the guards
  /// to weave, each naming its file. Meaningless once an error has been reported.
  [[nodiscard]] std::vector<WeaveEdit> check(const std::vector<WrittenGuard>& guards);
  /// Where the attribute of each edit that check() returned is, in the same order.
  [[nodiscard]] const std::vector<clang::SourceLocation>& sites() const { return sites_; }

 private:
  clang::ASTContext& context_;
  std::vector<clang::SourceLocation> sites_;
};

}  // namespace dlock::codegen
