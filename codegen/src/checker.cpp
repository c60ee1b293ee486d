#include "checker.hpp"

#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/StmtCXX.h>
#include <clang/AST/Type.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/SourceManager.h>
#include <llvm/Support/FileSystem.h>

#include <algorithm>
#include <map>
#include <set>

#include "dlock/codegen/attribute_lexer.hpp"
#include "dlock/codegen/edit_distance.hpp"
#include "dlock/codegen/files.hpp"
#include "dlock/codegen/guard_parser.hpp"
#include "placeholder_check.hpp"
#include "reporter.hpp"
#include "upgrade_check.hpp"

namespace dlock::codegen {
namespace {

// Where a guard is written, once it has been found in its file's text.
struct AttributeSite {
  clang::FileID file;
  std::size_t scope_offset = 0;
  std::size_t name_offset = 0;
  clang::SourceRange range;  ///< `dlock` .. `)`, for underlining the whole attribute
};

enum class Shape { kWeave, kElsewhere, kRefused };

std::string qualified_name(const clang::FunctionDecl& function) {
  std::vector<std::string> parts{function.getNameAsString()};
  for (const clang::DeclContext* context = function.getDeclContext();
       context && !context->isTranslationUnit(); context = context->getParent()) {
    if (const auto* ns = llvm::dyn_cast<clang::NamespaceDecl>(context)) {
      // As clang's qualified names: anonymous and inline namespaces do not show.
      if (!ns->isAnonymousNamespace() && !ns->isInline()) parts.push_back(ns->getNameAsString());
    } else if (const auto* record = llvm::dyn_cast<clang::RecordDecl>(context)) {
      if (record->getIdentifier()) {
        parts.push_back(record->getNameAsString());
      } else if (const auto* alias = record->getTypedefNameForAnonDecl()) {
        parts.push_back(alias->getNameAsString());
      }
    } else if (const auto* outer = llvm::dyn_cast<clang::FunctionDecl>(context)) {
      parts.push_back(outer->getNameAsString());  // a local class
    }
  }
  std::reverse(parts.begin(), parts.end());
  std::string name;
  for (const std::string& part : parts) name += (name.empty() ? "" : "::") + part;
  return name;
}

std::string guard_name(const GuardSpec& spec, const clang::FunctionDecl& function) {
  return spec.name ? *spec.name : qualified_name(function);
}

const clang::FunctionDecl* find_definition(const clang::FunctionDecl& function) {
  for (const clang::FunctionDecl* redeclaration : function.redecls()) {
    if (redeclaration->isThisDeclarationADefinition()) return redeclaration;
  }
  return nullptr;
}

bool is_std_optional(clang::QualType canonical) {
  if (const auto* record = canonical->getAsCXXRecordDecl()) {
    const auto* specialization = llvm::dyn_cast<clang::ClassTemplateSpecializationDecl>(record);
    return specialization && specialization->getName() == "optional" &&
           specialization->isInStdNamespace();
  }
  if (const auto* written = canonical->getAs<clang::TemplateSpecializationType>()) {
    const clang::TemplateDecl* known = written->getTemplateName().getAsTemplateDecl();
    return known && known->getName() == "optional" && known->isInStdNamespace();
  }
  return false;
}

SkipReturn classify_return(clang::QualType type) {
  const clang::QualType canonical = type.getCanonicalType();
  if (canonical->isVoidType()) return SkipReturn::kVoid;
  if (canonical->isSpecificBuiltinType(clang::BuiltinType::Bool)) return SkipReturn::kBool;
  if (is_std_optional(canonical)) return SkipReturn::kOptional;
  return SkipReturn::kNone;
}

class Checker {
 public:
  explicit Checker(clang::ASTContext& context)
      : context_(context), sources_(context.getSourceManager()), report_(context) {}

  void check(const WrittenGuard& guard, std::vector<WeaveEdit>& edits) {
    if (!guard.decl || guard.decl->isInvalidDecl()) return;  // clang has said why
    std::optional<AttributeSite> site = locate(guard);
    if (!site || !first_sighting(guard, *site)) return;
    std::optional<AttributeSyntax> syntax = read(*site);
    if (!syntax) return;
    const GuardParse parse = parse_guard_arguments(syntax->arguments, syntax->close_paren);
    for (const Problem& problem : parse.problems) report_.problem(problem, site->file);

    // The checks go on after a problem in the arguments, so that one run reports them all.
    const clang::FunctionDecl& declaration = *guard.decl;
    const clang::FunctionDecl* definition = nullptr;
    const Shape shape = check_shape(declaration, *site, definition);
    if (shape == Shape::kRefused) return;
    if (!claim(shape == Shape::kWeave ? *definition : declaration, *site)) return;

    std::vector<KeyCode> keys;
    bool keys_ok = true;
    for (const KeyTemplate& key : parse.spec.keys) {
      keys.push_back({key.format, {}});
      for (const Placeholder& placeholder : key.placeholders) {
        auto expression =
            check_placeholder(context_, report_, placeholder, declaration, definition, site->file);
        keys_ok = keys_ok && expression.has_value();
        if (expression) keys.back().arguments.push_back(std::move(*expression));
      }
    }
    const clang::FunctionDecl& function = definition ? *definition : declaration;
    const auto skip = check_return(function, parse.spec, site->file);
    if (parse.problems.empty() && keys_ok) {
      checked_.push_back({&declaration, shape == Shape::kWeave ? definition : nullptr,
                          guard_name(parse.spec, function), parse.spec, site->range.getBegin()});
    }
    if (shape != Shape::kWeave || !parse.problems.empty() || !keys_ok || !skip) return;
    edits.push_back(plan(*definition, *site, *syntax, parse.spec, std::move(keys), *skip));
  }

  /// The guards whose arguments and placeholders checked out, for check_upgrades().
  [[nodiscard]] const std::vector<CheckedGuard>& checked() const { return checked_; }

 private:
  // Where the attribute is written. A guard from a macro is refused: its text is not in the
  // file being woven, so it could not be removed (nor read back reliably).
  std::optional<AttributeSite> locate(const WrittenGuard& guard) {
    const bool in_file = guard.name_loc.isFileID() && guard.scope_loc.isFileID() &&
                         guard.name_loc.isValid() && guard.scope_loc.isValid() &&
                         sources_.getFileID(guard.name_loc) == sources_.getFileID(guard.scope_loc);
    if (!in_file) {
      report_.error(sources_.getExpansionLoc(guard.name_loc), {},
                    "'dlock::guard' cannot come from a macro expansion; write it on the "
                    "function itself");
      return std::nullopt;
    }
    AttributeSite site;
    site.file = sources_.getFileID(guard.name_loc);
    site.scope_offset = sources_.getFileOffset(guard.scope_loc);
    site.name_offset = sources_.getFileOffset(guard.name_loc);
    return site;
  }

  // Reads the arguments back from the source, and the extent of the whole attribute.
  std::optional<AttributeSyntax> read(AttributeSite& site) {
    bool invalid = false;
    const llvm::StringRef buffer = sources_.getBufferData(site.file, &invalid);
    if (invalid) return std::nullopt;  // clang could not read the file it parsed: said already
    AttributeRead read = read_attribute(std::string_view(buffer.data(), buffer.size()),
                                        site.scope_offset, site.name_offset,
                                        context_.getLangOpts());
    if (read.problem) {
      report_.problem(*read.problem, site.file);
      return std::nullopt;
    }
    site.range = {sources_.getLocForStartOfFile(site.file).getLocWithOffset(
                      static_cast<int>(site.scope_offset)),
                  report_.location(site.file, read.syntax->close_paren)};
    return std::move(read.syntax);
  }

  // The same attribute may reach us twice: a header without include guards included twice,
  // or one attribute before several declarators (`[[dlock::guard("k")]] void a(), b();`).
  bool first_sighting(const WrittenGuard& guard, const AttributeSite& site) {
    const clang::FileEntry* entry = sources_.getFileEntryForID(site.file);
    const auto key = std::make_pair(entry, site.name_offset);
    const auto [seen, inserted] = sightings_.emplace(key, guard.decl);
    if (inserted) return true;
    if (seen->second->getCanonicalDecl() != guard.decl->getCanonicalDecl() &&
        reported_.insert(key).second) {
      report_.error(guard.scope_loc, {},
                    "one 'dlock::guard' cannot guard several functions declared together; "
                    "declare them separately");
    }
    return false;
  }

  // One guard per function: a guard on a header declaration and another on the definition
  // would lock twice.
  bool claim(const clang::FunctionDecl& function, const AttributeSite& site) {
    const auto [first, inserted] =
        claimed_.emplace(function.getCanonicalDecl(), site.range.getBegin());
    if (inserted) return true;
    report_.error(site.range.getBegin(), site.range,
                  "'" + function.getNameAsString() +
                      "' already has a 'dlock::guard'; a function takes one guard");
    report_.note(first->second, "the first 'dlock::guard' is here");
    return false;
  }

  Shape refuse(const AttributeSite& site, const std::string& message) {
    report_.error(site.range.getBegin(), site.range, message);
    return Shape::kRefused;
  }

  Shape check_shape(const clang::FunctionDecl& function, const AttributeSite& site,
                    const clang::FunctionDecl*& definition) {
    if (const auto* method = llvm::dyn_cast<clang::CXXMethodDecl>(&function);
        method && method->getParent()->isLambda()) {
      return refuse(site, "a lambda cannot be guarded; guard a named function and call it "
                          "from the lambda");
    }
    if (llvm::isa<clang::CXXConstructorDecl>(function)) {
      return refuse(site, "a constructor cannot be guarded: its base and member initializers "
                          "would run outside the lock; guard a function the constructor calls");
    }
    if (llvm::isa<clang::CXXDestructorDecl>(function)) {
      return refuse(site, "a destructor cannot be guarded: members and bases would be "
                          "destroyed outside the lock; guard a function the destructor calls");
    }
    if (llvm::isa<clang::CXXDeductionGuideDecl>(function)) {
      return refuse(site, "a deduction guide cannot be guarded");
    }
    // Deleted and defaulted first: a defaulted function may be implicitly constexpr.
    if (function.isDeleted()) {
      return refuse(site, "a deleted function cannot be guarded: it has no body");
    }
    definition = find_definition(function);
    if (function.isDefaulted() || (definition && definition->isDefaulted())) {
      return refuse(site, "a defaulted function cannot be guarded: it has no body to weave "
                          "into; write the body out");
    }
    if (function.isConsteval()) {
      return refuse(site, "a consteval function cannot be guarded: it runs at compile time");
    }
    if (function.isConstexpr()) {
      return refuse(site, "a constexpr function cannot be guarded: taking a lock is not a "
                          "constant expression");
    }
    if (!definition) {
      if (function.isPureVirtual()) {
        return refuse(site, "a pure virtual function without a body cannot be guarded; guard "
                            "the overriding functions");
      }
      if (site.file == sources_.getMainFileID()) {
        return refuse(site, "'" + function.getNameAsString() +
                                "' is guarded here but not defined in this file, so the guard "
                                "would be lost; guard the definition, or a declaration in a "
                                "header that the defining file includes");
      }
      return Shape::kElsewhere;  // woven where it is defined, which includes this header too
    }
    return check_body(*definition, site);
  }

  Shape check_body(const clang::FunctionDecl& definition, const AttributeSite& site) {
    const clang::Stmt* body = definition.getBody();
    if (llvm::isa_and_nonnull<clang::CoroutineBodyStmt>(body)) {
      return refuse(site, "a coroutine cannot be guarded: the lock would live in the coroutine "
                          "frame across suspensions; guard a function the coroutine calls");
    }
    if (llvm::isa_and_nonnull<clang::CXXTryStmt>(body)) {
      return refuse(site, "a function-try-block cannot be guarded: its handlers would catch the "
                          "guard's own exceptions; put the try block inside the body");
    }
    const auto* compound = llvm::dyn_cast_or_null<clang::CompoundStmt>(body);
    if (!compound) return refuse(site, "cannot weave into the body of this function");
    const clang::SourceLocation brace = compound->getLBracLoc();
    if (brace.isMacroID()) {
      return refuse(site, "the body of '" + definition.getNameAsString() +
                              "' comes from a macro expansion and cannot be woven");
    }
    if (sources_.getFileID(brace) != sources_.getMainFileID() &&
        sources_.isInSystemHeader(brace)) {
      const std::string header = sources_.getFilename(brace).str();
      refuse(site, "a guarded definition in system header '" + header +
                       "' cannot be woven: put its directory on -I, not -isystem, and include "
                       "it from project files (a header first included by a system header "
                       "is one too)");
      report_.note(definition.getLocation(), "the definition is here");
      return Shape::kRefused;
    }
    return Shape::kWeave;  // in the source, or in a project header woven as a copy
  }

  std::string type_name(clang::QualType type) const {
    return type.getAsString(context_.getPrintingPolicy());
  }

  // What a skipped call returns, or nullopt after reporting that on_busy=skip is impossible.
  std::optional<SkipReturn> check_return(const clang::FunctionDecl& function,
                                         const GuardSpec& spec, clang::FileID file) {
    const clang::QualType type = function.getReturnType();
    SkipReturn skip = classify_return(type);
    std::string why;
    if (type->getContainedDeducedType() && skip == SkipReturn::kOptional) {
      // `return ::std::nullopt;` first would make `auto` deduce std::nullopt_t.
      skip = SkipReturn::kNone;
      why = "; with a deduced return type, write std::optional<...> out";
    } else if (skip == SkipReturn::kNone && type->isDependentType()) {
      why = "; '" + type_name(type) + "' depends on template parameters, write one of those "
            "types out";
    } else if (skip == SkipReturn::kNone) {
      why = "; '" + function.getNameAsString() + "' returns '" + type_name(type) + "'";
    }
    const bool wants_skip = spec.options.on_busy == BusyAction::kSkip;
    if (!wants_skip || skip != SkipReturn::kNone) return skip;
    report_.problem({spec.on_busy_offset, spec.on_busy_length,
                     "on_busy=skip needs a function returning void, bool or std::optional<T>" +
                         why,
                     {}, {}},
                    file);
    return std::nullopt;
  }

  LinePosition position(clang::SourceLocation location) const {
    const clang::PresumedLoc presumed = sources_.getPresumedLoc(location);
    std::string file = presumed.getFilename();
    // Without a #line of the user's own, name the file by its absolute path.
    const clang::OptionalFileEntryRef entry =
        sources_.getFileEntryRefForID(sources_.getFileID(location));
    if (entry && file == entry->getName()) file = absolute_path(file);
    return {file, presumed.getLine()};
  }

  WeaveEdit plan(const clang::FunctionDecl& definition, const AttributeSite& site,
                 const AttributeSyntax& syntax, const GuardSpec& spec, std::vector<KeyCode> keys,
                 SkipReturn skip) {
    const auto* body = llvm::cast<clang::CompoundStmt>(definition.getBody());
    const clang::SourceLocation brace = body->getLBracLoc();
    WeaveEdit edit;
    const clang::FileID body_file = sources_.getFileID(brace);
    // A header is woven only where it holds a body; elsewhere its guard stays, as on any
    // header declaration (g++ ignores it with -Wattributes).
    if (site.file == sources_.getMainFileID() || site.file == body_file) {
      edit.removal = syntax.removal;
    }
    edit.body_file = path_of(sources_, body_file);
    edit.attribute_file = path_of(sources_, site.file);
    edit.body_offset = sources_.getFileOffset(brace) + 1;
    edit.brace = position(brace);
    GuardCode& code = edit.code;
    code.name = guard_name(spec, definition);
    code.policy = spec.policy.value_or("");
    code.options = spec.options;
    code.keys = std::move(keys);
    code.skip = skip;
    code.attribute = position(site.range.getBegin());
    return edit;
  }

  clang::ASTContext& context_;
  clang::SourceManager& sources_;
  Reporter report_;
  std::map<std::pair<const clang::FileEntry*, std::size_t>, const clang::FunctionDecl*> sightings_;
  std::set<std::pair<const clang::FileEntry*, std::size_t>> reported_;
  std::map<const clang::FunctionDecl*, clang::SourceLocation> claimed_;
  std::vector<CheckedGuard> checked_;
};

}  // namespace

std::string path_of(const clang::SourceManager& sources, clang::FileID file) {
  const clang::OptionalFileEntryRef entry = sources.getFileEntryRefForID(file);
  if (!entry) return {};
  std::string path = absolute_path(entry->getName().str());
  // `..` removed lexically may lead elsewhere through a symbolic link (to no file, or to
  // another one): then the real path names the file, as the fast path's scan names it.
  const llvm::StringRef real = entry->getFileEntry().tryGetRealPathName();
  if (!real.empty() && real != path) {
    bool same = false;
    if (llvm::sys::fs::equivalent(path, real, same) || !same) path = real.str();
  }
  return path;
}

GuardChecker::GuardChecker(clang::ASTContext& context) : context_(context) {}

std::vector<WeaveEdit> GuardChecker::check(const std::vector<WrittenGuard>& guards) {
  Checker checker(context_);
  std::vector<WeaveEdit> edits;
  sites_.clear();
  for (const WrittenGuard& guard : guards) {
    checker.check(guard, edits);
    sites_.resize(edits.size(), guard.scope_loc);
  }
  check_upgrades(context_, checker.checked());
  return edits;
}

}  // namespace dlock::codegen
