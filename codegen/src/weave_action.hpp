// The clang side of a run: parse the source with the guard attribute known, check the guards,
// weave, and note every file the translation unit read (for the depfile).
//
//   WeaveOutcome outcome;
//   tooling::ToolInvocation(command_line, std::make_unique<WeaveAction>(outcome, dir), files)
//       .run();
//   if (outcome.woven) { write(outcome.headers); write(*outcome.woven); }
#pragma once

#include <clang/Frontend/FrontendAction.h>

#include <optional>
#include <string>
#include <vector>

#include "dlock/codegen/attribute_lexer.hpp"
#include "guard_attribute.hpp"
#include "include_graph.hpp"

namespace dlock::codegen {

/// A woven copy of a project header that defines guarded functions (or includes one that
/// does): written to `path`, and every `#include` of the original in the woven files points
/// there instead.
struct WovenHeader {
  std::string path;
  std::string text;
  bool shared = false;  ///< under a key in the shared directory: never rewritten once there
};

/// What a run produced.
struct WeaveOutcome {
  /// Set only when clang and every guard check passed.
  std::optional<std::string> woven;
  /// Copies of headers, to write before `woven`.
  std::vector<WovenHeader> headers;
  /// Every file the translation unit read, absolute, the source first.
  std::vector<std::string> dependencies;
  /// Clang itself found errors in the source (not only the guard checks).
  bool clang_errors = true;
};

/// Parses one source, checks and weaves its guards.
class WeaveAction : public clang::ASTFrontendAction {
 public:
  /// Where woven copies of headers go: under `header_dir`, or by their keys under
  /// `shared_dir` (if not empty) when they can be shared; `context` is generator_context()
  /// of the compiler flags.
  struct Places {
    std::string header_dir;
    std::string shared_dir;
    std::string context;
  };

  WeaveAction(WeaveOutcome& outcome, Places places)
      : outcome_(outcome), places_(std::move(places)) {}

 protected:
  bool BeginSourceFileAction(clang::CompilerInstance& compiler) override;
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance& compiler,
                                                        llvm::StringRef file) override;
  void ExecuteAction() override;

 private:
  WeaveOutcome& outcome_;
  Places places_;
  GuardCollector collector_;
  IncludeGraph includes_;
};

}  // namespace dlock::codegen
