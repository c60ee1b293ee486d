#include "include_graph.hpp"

#include <clang/Basic/IdentifierTable.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Lex/Lexer.h>
#include <clang/Lex/MacroInfo.h>
#include <clang/Lex/PPCallbacks.h>
#include <llvm/Support/FileSystem.h>

#include <algorithm>
#include <deque>
#include <filesystem>

#include "dlock/codegen/files.hpp"
#include "dlock/codegen/header_cache.hpp"
#include "checker.hpp"

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
    std::string path = path_of(sources_, id);
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

  void HasInclude(clang::SourceLocation name, llvm::StringRef, bool angled,
                  clang::OptionalFileEntryRef target, clang::SrcMgr::CharacteristicKind) override {
    if (angled || !target || !name.isFileID()) return;
    const clang::OptionalFileEntryRef includer =
        sources_.getFileEntryRefForID(sources_.getFileID(name));
    if (!includer) return;
    const std::size_t begin = sources_.getFileOffset(name);
    const std::size_t length = clang::Lexer::MeasureTokenLength(name, sources_, language_);
    graph_.probes_.push_back({&includer->getFileEntry(), {begin, begin + length},
                              &target->getFileEntry()});
  }

  void InclusionDirective(clang::SourceLocation hash, const clang::Token& keyword,
                          llvm::StringRef,
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
    if (keyword.getIdentifierInfo() != nullptr &&
        keyword.getIdentifierInfo()->getName() == "include_next" &&
        keyword.getLocation().isFileID()) {
      const std::size_t at = sources_.getFileOffset(keyword.getLocation());
      directive.next_keyword = ByteRange{at, at + keyword.getLength()};
    }
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

bool IncludeGraph::includes(FileKey from, FileKey to) const {
  std::set<FileKey> reached{from};
  std::vector<FileKey> pending{from};
  while (!pending.empty()) {
    const FileKey next = pending.back();
    pending.pop_back();
    for (const IncludeDirective& directive : directives_) {
      if (directive.includer != next) continue;
      if (directive.target == to) return true;
      if (reached.insert(directive.target).second) pending.push_back(directive.target);
    }
  }
  return false;
}

std::set<FileKey> IncludeGraph::headers_to_copy(FileKey main, const std::set<FileKey>& headers,
                                                HeaderCopies& plan) const {
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
  return copied;
}

void IncludeGraph::place_copies(const std::set<FileKey>& copied, const std::string& dir,
                                const std::string& shared_dir, std::string_view context,
                                HeaderCopies& plan) const {
  // Their keys: from every project file each one reaches (a header that is not copied may
  // still decide a return type), and shareable only when no `#if` skipped a block in any of
  // them (the source's macros could have decided it otherwise).
  std::vector<FileKey> order;  // the copied headers first
  std::map<FileKey, std::size_t> position;
  std::vector<CopiedFile> files;
  auto add_file = [&](FileKey key) {
    position.emplace(key, files.size());
    order.push_back(key);
    files.push_back({file(key)->path, file(key)->text, {}});
  };
  for (const FileKey key : copied) add_file(key);
  for (std::size_t next = 0; next < files.size(); ++next) {
    for (const IncludeDirective& directive : directives_) {
      if (directive.includer != order[next]) continue;
      const ReadFile* target = file(directive.target);
      if (target == nullptr || target->system) continue;
      if (!position.count(directive.target)) add_file(directive.target);
      files[next].includes.push_back(position[directive.target]);
    }
  }
  for (const IncludeDirective& directive : directives_) {
    if (directive.includer == nullptr && copied.count(directive.target)) {
      plan.problems.emplace_back(
          directive.hash, "'" + file(directive.target)->path +
                              "' defines guarded functions (or includes a header that does) and "
                              "is included with -include, which dlock cannot point at its "
                              "woven copy; include it from the source");
    }
  }
  for (std::size_t i = 0; i < copied.size(); ++i) {
    bool shareable = !shared_dir.empty();
    std::set<std::size_t> reached{i};
    std::vector<std::size_t> pending_files{i};
    while (shareable && !pending_files.empty()) {
      const std::size_t next = pending_files.back();
      pending_files.pop_back();
      shareable = file(order[next])->skipped_first.empty();
      for (const std::size_t included : files[next].includes) {
        if (reached.insert(included).second) pending_files.push_back(included);
      }
    }
    if (shareable) {
      plan.copies.emplace(order[i],
                          shared_copy_path(shared_dir, copy_key(files, i, context), files[i].path));
      plan.shared.insert(order[i]);
    } else {
      plan.copies.emplace(order[i], own_copy_path(dir, files[i].path));
    }
  }
}

void IncludeGraph::unshare_mixed_copies(const std::set<FileKey>& copied, const std::string& dir,
                                        HeaderCopies& plan) const {
  // A copy names the copies it includes: shared only if they all are.
  for (bool changed = true; changed;) {
    changed = false;
    for (const IncludeDirective& directive : directives_) {
      if (plan.shared.count(directive.includer) && copied.count(directive.target) &&
          !plan.shared.count(directive.target)) {
        plan.shared.erase(directive.includer);
        plan.copies[directive.includer] = own_copy_path(dir, file(directive.includer)->path);
        changed = true;
      }
    }
  }

}

void IncludeGraph::point_includes_at_copies(FileKey main, const std::set<FileKey>& copied,
                                            HeaderCopies& plan) const {
  for (const IncludeDirective& directive : directives_) {
    const bool in_copy = copied.count(directive.includer) > 0;
    if (!in_copy && directive.includer != main) continue;
    const auto copy = plan.copies.find(directive.target);
    const ReadFile* target = file(directive.target);
    std::string to;
    if (copy != plan.copies.end()) {
      to = copy->second;
    } else if (in_copy && target != nullptr &&
               ((!directive.angled && !target->system) || directive.next_keyword)) {
      to = target->path;  // the copy is elsewhere: name the original exactly
    } else {
      continue;
    }
    if (in_copy && directive.next_keyword) {
      plan.rewrites[directive.includer].push_back({*directive.next_keyword, "include"});
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
  for (const IncludeProbe& probe : probes_) {
    const ReadFile* target = file(probe.target);
    if (!copied.count(probe.includer) || target == nullptr || target->system) continue;
    const auto copy = plan.copies.find(probe.target);
    const std::string& to = copy != plan.copies.end() ? copy->second : target->path;
    if (to.find_first_of("\"\\\n") == std::string::npos) {
      plan.rewrites[probe.includer].push_back({probe.name, "\"" + to + "\""});
    }
  }
}

namespace {

void drop_repeated_rewrites(HeaderCopies& plan) {
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
}

}  // namespace

HeaderCopies IncludeGraph::plan_copies(FileKey main, const std::set<FileKey>& headers,
                                       const std::string& dir, const std::string& shared_dir,
                                       std::string_view context) const {
  HeaderCopies plan;
  const std::set<FileKey> copied = headers_to_copy(main, headers, plan);
  place_copies(copied, dir, shared_dir, context, plan);
  unshare_mixed_copies(copied, dir, plan);
  point_includes_at_copies(main, copied, plan);
  drop_repeated_rewrites(plan);
  return plan;
}

}  // namespace dlock::codegen
