// Prints the generator's errors and notes through clang, so they look exactly like clang's.
#pragma once

#include <clang/AST/ASTContext.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/SourceManager.h>

#include <string>

#include "dlock/codegen/problem.hpp"

namespace dlock::codegen {

// Prints errors and notes through clang, so they look exactly like clang's own.
class Reporter {
 public:
  explicit Reporter(clang::ASTContext& context)
      : sources_(context.getSourceManager()), diagnostics_(context.getDiagnostics()) {
    error_id_ = diagnostics_.getCustomDiagID(clang::DiagnosticsEngine::Error, "%0");
    note_id_ = diagnostics_.getCustomDiagID(clang::DiagnosticsEngine::Note, "%0");
  }

  void error(clang::SourceLocation at, clang::SourceRange range, const std::string& message) {
    diagnostics_.Report(at, error_id_) << message << range;
  }

  void note(clang::SourceLocation at, const std::string& message) {
    diagnostics_.Report(at, note_id_) << message;
  }

  // A problem found in the text of the attribute, located by offset in `file`.
  void problem(const Problem& problem, clang::FileID file) {
    const clang::SourceLocation at = location(file, problem.offset);
    {
      // Emitted when the builder goes out of scope, which must come before the notes.
      auto builder = diagnostics_.Report(at, error_id_);
      builder << problem.message;
      const auto range = clang::CharSourceRange::getCharRange(
          at, at.getLocWithOffset(static_cast<int>(problem.length)));
      if (problem.length > 0) builder << range;
      if (problem.fix) builder << clang::FixItHint::CreateReplacement(range, *problem.fix);
    }
    for (const Note& n : problem.notes) note(location(file, n.offset), n.message);
  }

  clang::SourceLocation location(clang::FileID file, std::size_t offset) const {
    return sources_.getLocForStartOfFile(file).getLocWithOffset(static_cast<int>(offset));
  }

 private:
  clang::SourceManager& sources_;
  clang::DiagnosticsEngine& diagnostics_;
  unsigned error_id_ = 0;
  unsigned note_id_ = 0;
};

}  // namespace dlock::codegen
