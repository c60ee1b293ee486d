#include "placeholder_check.hpp"

#include <clang/AST/ASTContext.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/Type.h>

#include <algorithm>
#include <vector>

#include "dlock/codegen/edit_distance.hpp"

namespace dlock::codegen {
namespace {

// How deep `->` follows smart pointers whose operator-> returns another smart pointer.
constexpr int kMaxArrowDepth = 4;

class PlaceholderChecker {
 public:
  PlaceholderChecker(clang::ASTContext& context, Reporter& report)
      : context_(context), report_(report) {}

  // Checks one placeholder; returns the C++ expression for the definition's body.
  std::optional<std::string> check_placeholder(const Placeholder& placeholder,
                                               const clang::FunctionDecl& declaration,
                                               const clang::FunctionDecl* definition,
                                               clang::FileID file) {
    const auto* method = llvm::dyn_cast<clang::CXXMethodDecl>(&declaration);
    const bool has_this = method && method->isInstance();
    if (placeholder.root == "this") {
      if (!has_this) {
        const char* kind = method ? "a static member function" : "a free function";
        report_.problem({placeholder.root_offset, 4,
                         std::string("'this' cannot be used in the lock key of ") + kind, {}, {}},
                        file);
        return std::nullopt;
      }
      if (!check_members(placeholder, method->getThisType(), "this", file)) return std::nullopt;
      return placeholder_expression(placeholder, "this");
    }

    const auto parameters = declaration.parameters();
    const auto found = std::find_if(parameters.begin(), parameters.end(), [&](auto* parameter) {
      return parameter->getName() == placeholder.root;
    });
    if (found == parameters.end()) {
      report_unknown_parameter(placeholder, declaration, has_this, file);
      return std::nullopt;
    }
    const clang::ParmVarDecl& parameter = **found;
    if (parameter.isParameterPack()) {
      report_.problem({placeholder.root_offset, placeholder.root.size(),
                       "parameter pack '" + placeholder.root +
                           "' cannot be used in a lock key; name one value per placeholder",
                       {}, {}},
                      file);
      return std::nullopt;
    }
    // The body sees the definition's names, which may differ from the guarded declaration's.
    std::string spelling = placeholder.root;
    const auto index = static_cast<unsigned>(found - parameters.begin());
    if (definition && definition != &declaration && index < definition->getNumParams()) {
      const clang::ParmVarDecl* defined = definition->getParamDecl(index);
      if (defined->getName().empty()) {
        report_.problem({placeholder.root_offset, placeholder.root.size(),
                         "parameter '" + placeholder.root +
                             "' of the lock key has no name in the definition",
                         {}, {}},
                        file);
        report_.note(defined->getLocation(), "name the parameter here");
        return std::nullopt;
      }
      spelling = defined->getName().str();
    }
    if (!check_members(placeholder, parameter.getType(), placeholder.root, file)) {
      return std::nullopt;
    }
    return placeholder_expression(placeholder, spelling);
  }

  void report_unknown_parameter(const Placeholder& placeholder,
                                const clang::FunctionDecl& declaration, bool has_this,
                                clang::FileID file) {
    std::vector<std::string> candidates;
    for (const clang::ParmVarDecl* parameter : declaration.parameters()) {
      if (!parameter->getName().empty()) candidates.push_back(parameter->getName().str());
    }
    if (has_this) candidates.emplace_back("this");
    Problem problem{placeholder.root_offset, placeholder.root.size(),
                    "unknown parameter '" + placeholder.root + "' in lock key", {}, {}};
    if (auto suggestion = closest_match(placeholder.root, candidates)) {
      problem.message += "; did you mean '" + *suggestion + "'?";
      problem.fix = *suggestion;
    } else if (candidates.empty()) {
      problem.message += "; '" + declaration.getNameAsString() + "' has no named parameters";
    }
    report_.problem(problem, file);
  }

  std::string type_name(clang::QualType type) const {
    return type.getAsString(context_.getPrintingPolicy());
  }

  // Walks `.member` / `->member` from `type`. Types that depend on template parameters, or
  // records not complete here, are left to the compiler of the woven file.
  bool check_members(const Placeholder& placeholder, clang::QualType type, std::string described,
                     clang::FileID file) {
    for (const MemberStep& step : placeholder.members) {
      if (type.isNull() || type->isDependentType()) return true;
      type = type.getNonReferenceType();
      const clang::CXXRecordDecl* record = nullptr;
      if (step.access == Access::kDot) {
        if (type->isPointerType()) {
          report_.problem({step.offset, 1,
                           "'.' on '" + described + "', which is a pointer ('" + type_name(type) +
                               "'); did you mean '->'?",
                           "->", {}},
                          file);
          return false;
        }
        record = type->getAsCXXRecordDecl();
      } else {
        bool dependent = false;
        const auto target = arrow_target(type, dependent);
        if (dependent) return true;
        if (!target) {
          report_arrow_on_value(step, described, type, file);
          return false;
        }
        if ((*target)->isDependentType()) return true;
        type = *target;
        record = type->getAsCXXRecordDecl();
      }
      if (!record) {
        report_.problem({step.name_offset, step.name.size(),
                         "'" + described + "' has type '" + type_name(type) +
                             "', which has no members",
                         {}, {}},
                        file);
        return false;
      }
      if (!record->hasDefinition()) return true;
      record = record->getDefinition();
      bool uncertain = false;
      const clang::NamedDecl* member = find_member(*record, step.name, uncertain);
      if (!member) {
        if (uncertain) return true;
        report_unknown_member(step, *record, file);
        return false;
      }
      const clang::ValueDecl* value = data_member(*member, step, *record, file);
      if (!value) return false;
      described += (step.access == Access::kDot ? "." : "->") + step.name;
      type = value->getType();
    }
    return true;
  }

  void report_arrow_on_value(const MemberStep& step, const std::string& described,
                             clang::QualType type, clang::FileID file) {
    Problem problem{step.offset, 2,
                    "'->' on '" + described + "', which is not a pointer ('" + type_name(type) +
                        "')",
                    {}, {}};
    if (type->getAsCXXRecordDecl()) {
      problem.message += "; did you mean '.'?";
      problem.fix = ".";
    }
    report_.problem(problem, file);
  }

  // The member as a data member, or null after reporting that it is not one.
  const clang::ValueDecl* data_member(const clang::NamedDecl& member, const MemberStep& step,
                                      const clang::CXXRecordDecl& record, clang::FileID file) {
    const auto* value = llvm::dyn_cast<clang::ValueDecl>(&member);
    if (value && (llvm::isa<clang::FieldDecl>(value) ||
                  llvm::isa<clang::IndirectFieldDecl>(value) || llvm::isa<clang::VarDecl>(value))) {
      return value;
    }
    report_.problem({step.name_offset, step.name.size(),
                     "'" + step.name + "' is not a data member of '" + record.getNameAsString() +
                         "'; a lock key names data members only",
                     {}, {}},
                    file);
    return nullptr;
  }

  // What `->` reaches from `type`: the pointee of a pointer, or through operator-> of a
  // class (smart pointers, iterators). nullopt when `->` does not apply.
  std::optional<clang::QualType> arrow_target(clang::QualType type, bool& dependent) {
    for (int depth = 0; depth < kMaxArrowDepth; ++depth) {
      type = type.getNonReferenceType();
      if (type->isDependentType()) {
        dependent = true;
        return std::nullopt;
      }
      if (type->isPointerType()) return type->getPointeeType();
      const clang::CXXRecordDecl* record = type->getAsCXXRecordDecl();
      if (!record) return std::nullopt;
      if (!record->hasDefinition()) {
        dependent = true;  // incomplete here: the compiler decides
        return std::nullopt;
      }
      const clang::DeclarationName arrow =
          context_.DeclarationNames.getCXXOperatorName(clang::OO_Arrow);
      bool uncertain = false;
      const clang::NamedDecl* found = find_member(*record->getDefinition(), arrow, uncertain);
      if (const auto* templated = llvm::dyn_cast_or_null<clang::FunctionTemplateDecl>(found)) {
        found = templated->getTemplatedDecl();
      }
      const auto* method = llvm::dyn_cast_or_null<clang::FunctionDecl>(found);
      if (!method) {
        dependent = uncertain;
        return std::nullopt;
      }
      type = method->getReturnType();
    }
    dependent = true;
    return std::nullopt;
  }

  const clang::NamedDecl* find_member(const clang::CXXRecordDecl& record, llvm::StringRef name,
                                      bool& uncertain) {
    return find_member(record, clang::DeclarationName(&context_.Idents.get(name)), uncertain);
  }

  // Looks in the record, then in all its bases (forallBases, rather than bases(): GCC 12
  // sees a null `this` in LLVM 14's inline base-list accessors). `uncertain` is set when a
  // base is dependent or incomplete and might hold the member.
  const clang::NamedDecl* find_member(const clang::CXXRecordDecl& record,
                                      clang::DeclarationName name, bool& uncertain) {
    for (const clang::NamedDecl* found : record.lookup(name)) return found;
    const clang::NamedDecl* in_base = nullptr;
    const bool complete = record.forallBases([&](const clang::CXXRecordDecl* base) {
      if (!in_base) {
        for (const clang::NamedDecl* found : base->lookup(name)) {
          in_base = found;
          break;
        }
      }
      return true;
    });
    if (!complete && !in_base) uncertain = true;
    return in_base;
  }

  static void own_data_member_names(const clang::CXXRecordDecl& record,
                                    std::vector<std::string>& names) {
    for (const clang::Decl* member : record.decls()) {
      const auto* named = llvm::dyn_cast<clang::NamedDecl>(member);
      if (named && named->getIdentifier() &&
          (llvm::isa<clang::FieldDecl>(named) || llvm::isa<clang::IndirectFieldDecl>(named) ||
           llvm::isa<clang::VarDecl>(named))) {
        names.push_back(named->getName().str());
      }
    }
  }

  static void data_member_names(const clang::CXXRecordDecl& record,
                                std::vector<std::string>& names) {
    own_data_member_names(record, names);
    record.forallBases([&](const clang::CXXRecordDecl* base) {
      own_data_member_names(*base, names);
      return true;
    });
  }

  void report_unknown_member(const MemberStep& step, const clang::CXXRecordDecl& record,
                             clang::FileID file) {
    std::vector<std::string> candidates;
    data_member_names(record, candidates);
    Problem problem{step.name_offset, step.name.size(),
                    "no member named '" + step.name + "' in '" + record.getNameAsString() + "'",
                    {}, {}};
    if (auto suggestion = closest_match(step.name, candidates)) {
      problem.message += "; did you mean '" + *suggestion + "'?";
      problem.fix = *suggestion;
    }
    report_.problem(problem, file);
  }

 private:
  clang::ASTContext& context_;
  Reporter& report_;
};

}  // namespace

std::optional<std::string> check_placeholder(clang::ASTContext& context, Reporter& report,
                                             const Placeholder& placeholder,
                                             const clang::FunctionDecl& declaration,
                                             const clang::FunctionDecl* definition,
                                             clang::FileID file) {
  return PlaceholderChecker(context, report)
      .check_placeholder(placeholder, declaration, definition, file);
}

}  // namespace dlock::codegen
