// The frontend action behind parse_and_weave() (parse.hpp): parse the source with the guard
// attribute known, check the guards, weave, and note every file the translation unit read.
#pragma once

#include <clang/Frontend/FrontendAction.h>

#include <optional>
#include <string>
#include <vector>

#include "dlock/codegen/attribute_lexer.hpp"
#include "guard_attribute.hpp"
#include "include_graph.hpp"
#include "parse.hpp"

namespace dlock::codegen {

/// Parses one source, checks and weaves its guards.
class WeaveAction : public clang::ASTFrontendAction {
 public:
  using Places = WeavePlaces;

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
