#include "weave_action.hpp"

#include <clang/AST/ASTConsumer.h>
#include <clang/AST/ASTContext.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Lex/MacroInfo.h>
#include <clang/Lex/PPCallbacks.h>
#include <clang/Lex/Preprocessor.h>
#include <llvm/Support/FileSystem.h>

#include <map>
#include <set>

#include "checker.hpp"
#include "dlock/codegen/fast_path.hpp"
#include "dlock/codegen/files.hpp"
#include "dlock/codegen/weaver.hpp"

namespace dlock::codegen {
namespace {

// Records each file the preprocessor enters, in order, once, and the blocks of the main file
// that conditional compilation skips.
class PreprocessorRecorder : public clang::PPCallbacks {
 public:
  PreprocessorRecorder(const clang::SourceManager& sources, std::vector<std::string>& files,
                       std::vector<ByteRange>& skipped, bool& dlock_macro)
      : sources_(sources), files_(files), skipped_(skipped), dlock_macro_(dlock_macro) {}

  // A macro that mentions dlock may put a guard anywhere: no function body is skipped after
  // one is defined (see WeaveConsumer::shouldSkipFunctionBody).
  void MacroDefined(const clang::Token&, const clang::MacroDirective* directive) override {
    const clang::MacroInfo* macro = directive ? directive->getMacroInfo() : nullptr;
    if (macro == nullptr) return;
    for (const clang::Token& token : macro->tokens()) {
      const clang::IdentifierInfo* name = token.getIdentifierInfo();
      if (name != nullptr && name->getName() == "dlock") dlock_macro_ = true;
    }
  }

  void FileChanged(clang::SourceLocation location, FileChangeReason reason,
                   clang::SrcMgr::CharacteristicKind, clang::FileID) override {
    if (reason != EnterFile) return;
    const clang::FileID file = sources_.getFileID(sources_.getExpansionLoc(location));
    if (const clang::OptionalFileEntryRef entry = sources_.getFileEntryRefForID(file)) {
      std::string path = absolute_path(entry->getName().str());
      // `..` removed lexically may lead elsewhere through a symbolic link; Ninja must find
      // the file, or it would re-run the generator on every build.
      if (!llvm::sys::fs::exists(path) && !entry->getFileEntry().tryGetRealPathName().empty()) {
        path = entry->getFileEntry().tryGetRealPathName().str();
      }
      if (seen_.insert(path).second) files_.push_back(std::move(path));
    }
  }

  void SourceRangeSkipped(clang::SourceRange range, clang::SourceLocation) override {
    if (!sources_.isWrittenInMainFile(range.getBegin())) return;
    skipped_.push_back({sources_.getFileOffset(range.getBegin()),
                        sources_.getFileOffset(range.getEnd())});
  }

 private:
  const clang::SourceManager& sources_;
  std::vector<std::string>& files_;
  std::vector<ByteRange>& skipped_;
  bool& dlock_macro_;
  std::set<std::string> seen_;
};

class WeaveConsumer : public clang::ASTConsumer {
 public:
  WeaveConsumer(const GuardCollector& collector, const std::vector<ByteRange>& skipped,
                const bool& dlock_macro, WeaveOutcome& outcome)
      : collector_(collector), skipped_(skipped), dlock_macro_(dlock_macro), outcome_(outcome) {}

  // Most of a parse is the bodies of inline functions and templates in headers, which the
  // generator never looks at: they are skipped (the parser only matches their braces), except
  // in the main file, in headers that mention dlock::guard at all, for guarded functions (a
  // guarded definition in a header must still be reported), and after a macro mentioning
  // dlock was defined. Clang itself keeps bodies it needs: constexpr, deduced return types.
  bool shouldSkipFunctionBody(clang::Decl* decl) override {
    if (dlock_macro_) return false;
    const clang::SourceManager& sources = decl->getASTContext().getSourceManager();
    const clang::SourceLocation where = sources.getExpansionLoc(decl->getLocation());
    if (where.isInvalid() || sources.isWrittenInMainFile(where)) return false;
    const clang::FunctionDecl* function = decl->getAsFunction();
    if (function == nullptr) return false;
    const clang::FileID file = sources.getFileID(where);
    auto known = file_mentions_guard_.find(file);
    if (known == file_mentions_guard_.end()) {
      const llvm::StringRef text = sources.getBufferData(file);
      known = file_mentions_guard_.emplace(file, mentions_guard({text.data(), text.size()})).first;
    }
    if (known->second) return false;
    for (const WrittenGuard& guard : collector_.guards()) {
      if (guard.decl->getCanonicalDecl() == function->getCanonicalDecl()) return false;
    }
    return true;
  }

  void HandleTranslationUnit(clang::ASTContext& context) override {
    // Guards are checked even after a clang error, so that one run reports everything.
    std::vector<WeaveEdit> edits = GuardChecker(context).check(collector_.guards());
    report_unseen_guards(context);
    clang::DiagnosticsEngine& diagnostics = context.getDiagnostics();
    if (diagnostics.hasErrorOccurred()) return;

    const clang::SourceManager& sources = context.getSourceManager();
    const clang::FileID main = sources.getMainFileID();
    const clang::OptionalFileEntryRef entry = sources.getFileEntryRefForID(main);
    if (!entry) return;
    const llvm::StringRef text = sources.getBufferData(main);
    WeaveResult result = weave_source(std::string_view(text.data(), text.size()),
                                      absolute_path(entry->getName().str()), edits);
    if (!result.error.empty()) {
      const unsigned id = diagnostics.getCustomDiagID(clang::DiagnosticsEngine::Error,
                                                      "cannot weave this file: %0");
      diagnostics.Report(sources.getLocForStartOfFile(main), id) << result.error;
      return;
    }
    outcome_.woven = std::move(result.text);
  }

 private:
  // A guard in the main file that clang never handed over (written where C++ gives it to a
  // type, say) would silently go unwoven: the source text is lexed once more to be sure.
  void report_unseen_guards(clang::ASTContext& context) {
    const clang::SourceManager& sources = context.getSourceManager();
    const clang::FileID main = sources.getMainFileID();
    std::set<std::size_t> seen;
    for (const clang::SourceLocation location : collector_.seen()) {
      const clang::SourceLocation spelling = sources.getSpellingLoc(location);
      if (sources.getFileID(spelling) == main) seen.insert(sources.getFileOffset(spelling));
    }
    const llvm::StringRef text = sources.getBufferData(main);
    clang::DiagnosticsEngine& diagnostics = context.getDiagnostics();
    const unsigned id = diagnostics.getCustomDiagID(
        clang::DiagnosticsEngine::Error,
        "this 'dlock::guard' does not apply to a function declaration, so it cannot be "
        "woven; write it before the declaration or right after the function's name");
    for (const GuardMention& mention : find_guard_mentions({text.data(), text.size()})) {
      if (mention.in_directive || seen.count(mention.offset) || is_skipped(mention.offset)) {
        continue;
      }
      diagnostics.Report(sources.getLocForStartOfFile(main).getLocWithOffset(
                             static_cast<int>(mention.offset)),
                         id);
    }
  }

  bool is_skipped(std::size_t offset) const {
    for (const ByteRange& range : skipped_) {
      if (offset >= range.begin && offset < range.end) return true;
    }
    return false;
  }

  const GuardCollector& collector_;
  const std::vector<ByteRange>& skipped_;
  const bool& dlock_macro_;
  WeaveOutcome& outcome_;
  std::map<clang::FileID, bool> file_mentions_guard_;
};

}  // namespace

bool WeaveAction::BeginSourceFileAction(clang::CompilerInstance& compiler) {
  compiler.getPreprocessor().addPPCallbacks(std::make_unique<PreprocessorRecorder>(
      compiler.getSourceManager(), outcome_.dependencies, skipped_, dlock_macro_));
  compiler.getFrontendOpts().SkipFunctionBodies = true;  // asks WeaveConsumer, body by body
  return true;
}

std::unique_ptr<clang::ASTConsumer> WeaveAction::CreateASTConsumer(clang::CompilerInstance&,
                                                                   llvm::StringRef) {
  return std::make_unique<WeaveConsumer>(collector_, skipped_, dlock_macro_, outcome_);
}

void WeaveAction::ExecuteAction() {
  // The attribute handler reaches the collector only while the parse runs.
  ScopedGuardCollection collecting(collector_);
  clang::ASTFrontendAction::ExecuteAction();
}

}  // namespace dlock::codegen
