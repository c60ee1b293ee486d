// The clang side of a run: parse the source with the guard attribute known, check the guards,
// weave, and note every file the translation unit read (for the depfile).
//
//   WeaveOutcome outcome;
//   tooling::ToolInvocation(command_line, std::make_unique<WeaveAction>(outcome), files).run();
//   if (outcome.woven) write(*outcome.woven);
#pragma once

#include <clang/Frontend/FrontendAction.h>

#include <optional>
#include <string>
#include <vector>

#include "dlock/codegen/attribute_lexer.hpp"
#include "guard_attribute.hpp"

namespace dlock::codegen {

/// What a run produced.
struct WeaveOutcome {
  /// Set only when clang and every guard check passed.
  std::optional<std::string> woven;
  /// Every file the translation unit read, absolute, the source first.
  std::vector<std::string> dependencies;
};

/// Parses one source, checks and weaves its guards.
class WeaveAction : public clang::ASTFrontendAction {
 public:
  explicit WeaveAction(WeaveOutcome& outcome) : outcome_(outcome) {}

 protected:
  bool BeginSourceFileAction(clang::CompilerInstance& compiler) override;
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance& compiler,
                                                        llvm::StringRef file) override;
  void ExecuteAction() override;

 private:
  WeaveOutcome& outcome_;
  GuardCollector collector_;
  std::vector<ByteRange> skipped_;  ///< blocks of the main file skipped by #if
  bool dlock_macro_ = false;        ///< a macro mentioning dlock was defined
};

}  // namespace dlock::codegen
