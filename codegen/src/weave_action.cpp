#include "weave_action.hpp"

#include <clang/AST/ASTConsumer.h>
#include <clang/AST/ASTContext.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Lex/HeaderSearch.h>
#include <clang/Lex/PPCallbacks.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Tooling/CompilationDatabase.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/VirtualFileSystem.h>

#include <map>
#include <set>

#include "checker.hpp"
#include "dlock/codegen/fast_path.hpp"
#include "dlock/codegen/files.hpp"
#include "dlock/codegen/weaver.hpp"

namespace dlock::codegen {
namespace {

class WeaveConsumer : public clang::ASTConsumer {
 public:
  WeaveConsumer(const GuardCollector& collector, const IncludeGraph& includes,
                const WeaveAction::Places& places, clang::Preprocessor& preprocessor,
                WeaveOutcome& outcome)
      : collector_(collector),
        includes_(includes),
        places_(places),
        preprocessor_(preprocessor),
        outcome_(outcome) {}

  // Most of a parse is the bodies of inline functions and templates in headers, which the
  // generator never looks at: they are skipped (the parser only matches their braces), except
  // in the main file, in headers that mention dlock::guard at all, for guarded functions (a
  // guarded definition in a header is woven into its copy), and after a macro mentioning
  // dlock was defined. Clang itself keeps bodies it needs: constexpr, deduced return types.
  bool shouldSkipFunctionBody(clang::Decl* decl) override {
    if (includes_.dlock_macro()) return false;
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
    outcome_.clang_errors =
        context.getDiagnostics().getNumErrors() > collector_.misplaced();
    // Guards are checked even after a clang error, so that one run reports everything.
    GuardChecker checker(context);
    std::vector<WeaveEdit> edits = checker.check(collector_.guards());
    const std::vector<clang::SourceLocation>& sites = checker.sites();
    const clang::SourceManager& sources = context.getSourceManager();
    clang::DiagnosticsEngine& diagnostics = context.getDiagnostics();
    const FileKey main = includes_.key_of(path_of(sources, sources.getMainFileID()));
    if (main == nullptr) {
      report(diagnostics, sources.getLocForStartOfFile(sources.getMainFileID()),
             "cannot tell which file this is (" +
                 path_of(sources, sources.getMainFileID()) + "); nothing was woven");
      return;
    }
    // Each file's edits name it by its one path (a header may be spelled several ways).
    std::set<FileKey> headers;
    for (std::size_t i = 0; i < edits.size(); ++i) {
      WeaveEdit& edit = edits[i];
      const FileKey body = includes_.key_of(edit.body_file);
      if (body == nullptr) {
        report(diagnostics, sites[i],
               "cannot tell which file holds the body of this guarded function (" +
                   edit.body_file + "); it was not woven");
        continue;
      }
      if (body != main) headers.insert(body);
      check_reaches_guard(diagnostics, edit, body, sites[i]);
      canonical_path(edit.body_file);
      canonical_path(edit.attribute_file);
    }
    report_unseen_guards(context, main);
    for (const FileKey header : headers) report_unseen_guards(context, header);
    if (diagnostics.hasErrorOccurred()) return;

    const HeaderCopies copies = includes_.plan_copies(main, headers, places_.header_dir,
                                                      places_.shared_dir, places_.context);
    for (const auto& [where, message] : copies.problems) report(diagnostics, where, message);
    if (diagnostics.hasErrorOccurred()) return;

    for (const auto& [key, path] : copies.copies) {
      std::optional<std::string> text = weave(context, key, edits, copies, false);
      if (!text) return;
      outcome_.headers.push_back({path, original_first_check(context, key) + std::move(*text),
                                  copies.shared.count(key) > 0});
    }
    outcome_.woven = weave(context, main, edits, copies, true);
  }

 private:
  static void report(clang::DiagnosticsEngine& diagnostics, clang::SourceLocation where,
                     const std::string& message) {
    const unsigned id = diagnostics.getCustomDiagID(clang::DiagnosticsEngine::Error, "%0");
    diagnostics.Report(where, id) << message;
  }

  // A guard on a declaration in one header, with the definition in another: every source
  // that compiles the definition must see the guard, or one that includes only the defining
  // header would compile it unguarded (and the linker keeps either copy). So the defining
  // file must include the guard's file.
  void check_reaches_guard(clang::DiagnosticsEngine& diagnostics, const WeaveEdit& edit,
                           FileKey body, clang::SourceLocation site) const {
    const FileKey guard = includes_.key_of(edit.attribute_file);
    if (guard == nullptr || guard == body || includes_.includes(body, guard)) return;
    report(diagnostics, site,
           "this guard's function is defined in '" + edit.body_file +
               "', which does not include '" + edit.attribute_file +
               "': a source including only the former would compile it without the lock; "
               "include this header there, or put the guard on the definition");
  }

  void canonical_path(std::string& path) const {
    if (const ReadFile* file = includes_.file(includes_.key_of(path))) path = file->path;
  }

  // A copy and its original are two files: were the original included first (through a
  // header dlock does not see, such as a system header), its include guard would hide the
  // copy and leave the definitions unguarded. The copy refuses to compile then.
  std::string original_first_check(clang::ASTContext& context, FileKey key) {
    const ReadFile& file = *includes_.file(key);
    const clang::OptionalFileEntryRef entry =
        context.getSourceManager().getFileEntryRefForID(file.first);
    if (!entry) return {};
    const clang::IdentifierInfo* macro =
        preprocessor_.getHeaderSearchInfo().getFileInfo(*entry).getControllingMacro(nullptr);
    if (macro == nullptr) return {};  // `#pragma once`: both would be compiled, and clash
    const std::string name = macro->getName().str();
    const std::string mark = "DLOCK_WOVEN_" + name;
    return "#if defined(" + name + ") && !defined(" + mark + ")\n#error \"dlock: " +
           file.path + " was included before its woven copy, without its guards (through a "
           "system header or -include?); include it from project files only\"\n#endif\n"
           "#define " + mark + "\n";
  }

  // One woven file: the source (with the runtime's includes first) or a header's copy.
  std::optional<std::string> weave(clang::ASTContext& context, FileKey key,
                                   const std::vector<WeaveEdit>& edits,
                                   const HeaderCopies& copies, bool source) {
    const clang::SourceManager& sources = context.getSourceManager();
    const ReadFile& file = *includes_.file(key);
    const llvm::StringRef text = sources.getBufferData(file.first);
    const auto rewrites = copies.rewrites.find(key);
    WeaveResult result = weave_source(
        std::string_view(text.data(), text.size()), file.path, edits,
        rewrites == copies.rewrites.end() ? std::vector<TextEdit>{} : rewrites->second, source);
    if (!result.error.empty()) {
      report(context.getDiagnostics(), sources.getLocForStartOfFile(file.first),
             "cannot weave this file: " + result.error);
      return std::nullopt;
    }
    return std::move(result.text);
  }

  // A guard in a woven file that clang never handed over (written where C++ gives it to a
  // type, say) would silently go unwoven: the file's text is lexed once more to be sure.
  void report_unseen_guards(clang::ASTContext& context, FileKey key) {
    const clang::SourceManager& sources = context.getSourceManager();
    const ReadFile* file = includes_.file(key);
    if (file == nullptr) return;
    std::set<std::size_t> seen;
    for (const clang::SourceLocation location : collector_.seen()) {
      const clang::SourceLocation spelling = sources.getSpellingLoc(location);
      if (includes_.key_of(path_of(sources, sources.getFileID(spelling))) == key) {
        seen.insert(sources.getFileOffset(spelling));
      }
    }
    const llvm::StringRef text = sources.getBufferData(file->first);
    for (const GuardMention& mention : find_guard_mentions({text.data(), text.size()})) {
      if (mention.in_directive || seen.count(mention.offset) ||
          is_skipped(*file, mention.offset)) {
        continue;
      }
      report(context.getDiagnostics(),
             sources.getLocForStartOfFile(file->first)
                 .getLocWithOffset(static_cast<int>(mention.offset)),
             "this 'dlock::guard' does not apply to a function declaration, so it cannot be "
             "woven; write it before the declaration or right after the function's name");
    }
  }

  static bool is_skipped(const ReadFile& file, std::size_t offset) {
    for (const ByteRange& range : file.skipped) {
      if (offset >= range.begin && offset < range.end) return true;
    }
    return false;
  }

  const GuardCollector& collector_;
  const IncludeGraph& includes_;
  const WeaveAction::Places& places_;
  clang::Preprocessor& preprocessor_;
  WeaveOutcome& outcome_;
  std::map<clang::FileID, bool> file_mentions_guard_;
};

}  // namespace

bool WeaveAction::BeginSourceFileAction(clang::CompilerInstance& compiler) {
  compiler.getPreprocessor().addPPCallbacks(
      includes_.recorder(compiler.getSourceManager(), compiler.getLangOpts()));
  compiler.getFrontendOpts().SkipFunctionBodies = true;  // asks WeaveConsumer, body by body
  return true;
}

std::unique_ptr<clang::ASTConsumer> WeaveAction::CreateASTConsumer(
    clang::CompilerInstance& compiler, llvm::StringRef) {
  return std::make_unique<WeaveConsumer>(collector_, includes_, places_,
                                         compiler.getPreprocessor(), outcome_);
}

WeaveOutcome parse_and_weave(const std::string& source, std::vector<std::string> flags,
                             WeavePlaces places) {
  const clang::tooling::FixedCompilationDatabase database(".", flags);
  std::vector<clang::tooling::CompileCommand> commands = database.getCompileCommands(source);
  WeaveOutcome outcome;
  if (commands.empty()) return outcome;
  // ToolInvocation rather than ClangTool: the same driver, without ClangTool's extra
  // "Error while processing" line after clang's own diagnostics.
  llvm::IntrusiveRefCntPtr<clang::FileManager> files(
      new clang::FileManager(clang::FileSystemOptions(), llvm::vfs::getRealFileSystem()));
  clang::tooling::ToolInvocation invocation(
      std::move(commands.front().CommandLine),
      std::make_unique<WeaveAction>(outcome, std::move(places)), files.get());
  if (!invocation.run()) outcome.woven.reset();
  return outcome;
}

void WeaveAction::ExecuteAction() {
  // The attribute handler reaches the collector only while the parse runs.
  ScopedGuardCollection collecting(collector_);
  clang::ASTFrontendAction::ExecuteAction();
  outcome_.dependencies = includes_.dependencies();
}

}  // namespace dlock::codegen
