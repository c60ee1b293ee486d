#include "include_graph.hpp"

#include <clang/Basic/IdentifierTable.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Lex/Lexer.h>
#include <clang/Lex/MacroInfo.h>
#include <clang/Lex/PPCallbacks.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/xxhash.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>

#include "dlock/codegen/files.hpp"
#include "dlock/codegen/header_cache.hpp"

namespace dlock::codegen {

class IncludeRecorder : public clang::PPCallbacks {
 public:
  IncludeRecorder(IncludeGraph& graph, const clang::SourceManager& sources,
                  const clang::LangOptions& language)
      : graph_(graph), sources_(sources), language_(language) {}

  // A macro that mentions dlock may put a guard anywhere: no function body is skipped after
  // one is defined (see WeaveConsumer::shouldSkipFunctionBody).
  void MacroDefined(const clang::Token&, const clang::MacroDirective* directive) override {
    const clang::MacroInfo* macro = directive ? directive->getMacroInfo() : nullptr;
    if (macro == nullptr) return;
    for (const clang::Token& token : macro->tokens()) {
      const clang::IdentifierInfo* name = token.getIdentifierInfo();
      if (name != nullptr && name->getName() == "dlock") graph_.dlock_macro_ = true;
    }
  }

  void FileChanged(clang::SourceLocation location, FileChangeReason reason,
                   clang::SrcMgr::CharacteristicKind kind, clang::FileID) override {
    if (reason != EnterFile) return;
    const clang::FileID id = sources_.getFileID(sources_.getExpansionLoc(location));
    const clang::OptionalFileEntryRef entry = sources_.getFileEntryRefForID(id);
    if (!entry) return;
    std::string path = absolute_path(entry->getName().str());
    // `..` removed lexically may lead elsewhere through a symbolic link; Ninja must find
    // the file, or it would re-run the generator on every build.
    if (!llvm::sys::fs::exists(path) && !entry->getFileEntry().tryGetRealPathName().empty()) {
      path = entry->getFileEntry().tryGetRealPathName().str();
    }
    const FileKey key = &entry->getFileEntry();
    graph_.keys_.emplace(path, key);
    auto [file, inserted] = graph_.files_.try_emplace(key);
    if (!inserted) return;
    file->second.first = id;
    file->second.path = path;
    const llvm::StringRef text = sources_.getBufferData(id);
    file->second.text = std::string_view(text.data(), text.size());
    file->second.system = clang::SrcMgr::isSystem(kind);
    graph_.dependencies_.push_back(std::move(path));
  }

  void InclusionDirective(clang::SourceLocation hash, const clang::Token&, llvm::StringRef,
                          bool angled, clang::CharSourceRange name,
                          clang::OptionalFileEntryRef target, llvm::StringRef, llvm::StringRef,
                          const clang::Module*, bool, clang::SrcMgr::CharacteristicKind) override {
    if (!target || !hash.isFileID()) return;
    IncludeDirective directive;
    directive.hash = hash;
    directive.angled = angled;
    directive.target = &target->getFileEntry();
    const clang::OptionalFileEntryRef includer =
        sources_.getFileEntryRefForID(sources_.getFileID(hash));
    if (!includer) {  // `-include` on the command line: nothing to point elsewhere
      directive.computed = true;
      graph_.directives_.push_back(directive);
      return;
    }
    directive.includer = &includer->getFileEntry();
    const clang::SourceLocation begin = name.getBegin();
    const clang::SourceLocation end = name.getEnd();
    directive.computed = !begin.isFileID() || !end.isFileID() ||
                         sources_.getFileID(begin) != sources_.getFileID(hash);
    if (!directive.computed) {
      std::size_t stop = sources_.getFileOffset(end);
      if (name.isTokenRange()) stop += clang::Lexer::MeasureTokenLength(end, sources_, language_);
      directive.name = {sources_.getFileOffset(begin), stop};
    }
    graph_.directives_.push_back(directive);
  }

  void SourceRangeSkipped(clang::SourceRange range, clang::SourceLocation) override {
    const clang::SourceLocation begin = range.getBegin();
    const clang::OptionalFileEntryRef entry =
        sources_.getFileEntryRefForID(sources_.getFileID(begin));
    if (!entry) return;
    auto file = graph_.files_.find(&entry->getFileEntry());
    if (file == graph_.files_.end()) return;
    const ByteRange skipped{sources_.getFileOffset(begin), sources_.getFileOffset(range.getEnd())};
    file->second.skipped.push_back(skipped);
    if (sources_.getFileID(begin) == file->second.first) {
      file->second.skipped_first.push_back(skipped);
    }
  }

 private:
  IncludeGraph& graph_;
  const clang::SourceManager& sources_;
  const clang::LangOptions& language_;
};

std::unique_ptr<clang::PPCallbacks> IncludeGraph::recorder(const clang::SourceManager& sources,
                                                           const clang::LangOptions& language) {
  return std::make_unique<IncludeRecorder>(*this, sources, language);
}

const ReadFile* IncludeGraph::file(FileKey key) const {
  auto found = files_.find(key);
  return found == files_.end() ? nullptr : &found->second;
}

FileKey IncludeGraph::key_of(const std::string& path) const {
  auto found = keys_.find(path);
  return found == keys_.end() ? nullptr : found->second;
}

namespace {

// `dir/<hash of the original path>/<its name>`: the name stays readable in the compiler's
// "In file included from" lines, and two headers of the same name do not meet.
std::string copy_path(const std::string& dir, const std::string& original) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(llvm::xxh3_64bits(original)));
  return dir + "/" + std::string(hash, 8) + "/" +
         std::filesystem::path(original).filename().string();
}

}  // namespace

// A copy may be shared when no block that `#if` skipped could have shaped it: none holds a
// guard or an include (the words are enough; a false alarm only costs a parse).
bool shapes_nothing(const ReadFile& file) {
  for (const ByteRange& range : file.skipped_first) {
    const std::string_view block = file.text.substr(range.begin, range.end - range.begin);
    for (const std::string_view word : {"dlock", "include", "import"}) {
      if (block.find(word) != std::string_view::npos) return false;
    }
  }
  return true;
}

HeaderCopies IncludeGraph::plan_copies(FileKey main, const std::set<FileKey>& headers,
                                       const std::string& dir, const std::string& shared_dir,
                                       std::string_view context) const {
  HeaderCopies plan;
  // The headers to copy: those with bodies, and whatever includes one of them, up to the
  // source. A system header on the way cannot be copied (its own includes would change).
  std::set<FileKey> copied(headers.begin(), headers.end());
  std::deque<FileKey> pending(headers.begin(), headers.end());
  while (!pending.empty()) {
    const FileKey target = pending.front();
    pending.pop_front();
    for (const IncludeDirective& directive : directives_) {
      if (directive.target != target || directive.includer == main ||
          directive.includer == nullptr || copied.count(directive.includer)) {
        continue;
      }
      const ReadFile* includer = file(directive.includer);
      if (includer == nullptr || includer->system) {
        plan.problems.emplace_back(
            directive.hash, "'" + file(target)->path +
                                "' defines guarded functions (or includes a header that does) "
                                "and is included here by a system header, which dlock cannot "
                                "weave; include it from a project header or the source");
        continue;
      }
      copied.insert(directive.includer);
      pending.push_back(directive.includer);
    }
  }
  // Their keys, from the copied headers each one reaches.
  const std::vector<FileKey> order(copied.begin(), copied.end());
  std::map<FileKey, std::size_t> position;
  std::vector<CopiedFile> files;
  for (const FileKey key : order) {
    position.emplace(key, files.size());
    files.push_back({file(key)->path, file(key)->text, {}});
  }
  for (const IncludeDirective& directive : directives_) {
    if (directive.includer == nullptr && copied.count(directive.target)) {
      plan.problems.emplace_back(
          directive.hash, "'" + file(directive.target)->path +
                              "' defines guarded functions (or includes a header that does) and "
                              "is included with -include, which dlock cannot point at its "
                              "woven copy; include it from the source");
    }
    if (copied.count(directive.includer) && copied.count(directive.target)) {
      files[position[directive.includer]].includes.push_back(position[directive.target]);
    }
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string key = copy_key(files, i, context);
    bool shareable = !shared_dir.empty();
    // Every copy it reaches must be shareable too: its text names their paths.
    std::set<std::size_t> reached{i};
    std::vector<std::size_t> pending_files{i};
    while (shareable && !pending_files.empty()) {
      const std::size_t next = pending_files.back();
      pending_files.pop_back();
      shareable = shapes_nothing(*file(order[next]));
      for (const std::size_t included : files[next].includes) {
        if (reached.insert(included).second) pending_files.push_back(included);
      }
    }
    if (shareable) {
      plan.copies.emplace(order[i], shared_copy_path(shared_dir, key, files[i].path));
      plan.shared.insert(order[i]);
    } else {
      plan.copies.emplace(order[i], copy_path(dir, files[i].path));
    }
  }

  for (const IncludeDirective& directive : directives_) {
    const bool in_copy = copied.count(directive.includer) > 0;
    if (!in_copy && directive.includer != main) continue;
    const auto copy = plan.copies.find(directive.target);
    const ReadFile* target = file(directive.target);
    std::string to;
    if (copy != plan.copies.end()) {
      to = copy->second;
    } else if (in_copy && !directive.angled && target != nullptr && !target->system) {
      to = target->path;  // the copy is elsewhere: name the original exactly
    } else {
      continue;
    }
    if (directive.computed || to.find_first_of("\"\n") != std::string::npos) {
      plan.problems.emplace_back(
          directive.hash, "this #include reaches '" + (target ? target->path : to) +
                              "', which dlock weaves as a copy, but cannot be pointed at the "
                              "copy: name the header directly, in quotes or brackets");
      continue;
    }
    plan.rewrites[directive.includer].push_back({directive.name, "\"" + to + "\""});
  }
  // A header included twice gives the same directive twice.
  for (auto& [key, edits] : plan.rewrites) {
    std::sort(edits.begin(), edits.end(),
              [](const TextEdit& a, const TextEdit& b) { return a.range.begin < b.range.begin; });
    edits.erase(std::unique(edits.begin(), edits.end(),
                            [](const TextEdit& a, const TextEdit& b) {
                              return a.range.begin == b.range.begin;
                            }),
                edits.end());
  }
  return plan;
}

}  // namespace dlock::codegen
