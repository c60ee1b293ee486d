#include "upgrade_check.hpp"

#include <clang/AST/DeclCXX.h>
#include <clang/AST/Expr.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/ExprConcepts.h>
#include <clang/AST/Stmt.h>
#include <clang/Basic/Builtins.h>

#include <algorithm>
#include <map>
#include <set>

#include "reporter.hpp"

namespace dlock::codegen {
namespace {

bool is_shared(const GuardSpec& spec) { return spec.options.mode == ::dlock::LockMode::kShared; }

// Exclusive, and a lock rather than a semaphore (a permit is a hold of its own).
bool is_exclusive(const GuardSpec& spec) { return !is_shared(spec) && !spec.options.permits; }

// The calls that run while the guard is held: not those in a lambda or a local class (they
// may run elsewhere, later), in an unevaluated operand, or in a discarded `if constexpr` branch.
void collect_calls(const clang::Stmt* stmt, const clang::ASTContext& context,
                   std::vector<const clang::CallExpr*>& calls) {
  if (!stmt || llvm::isa<clang::LambdaExpr, clang::UnaryExprOrTypeTraitExpr, clang::CXXNoexceptExpr,
                         clang::CXXTypeidExpr, clang::RequiresExpr, clang::GenericSelectionExpr>(
                   stmt)) {
    return;
  }
  if (const auto* branch = llvm::dyn_cast<clang::IfStmt>(stmt); branch && branch->isConstexpr()) {
    if (const auto taken = branch->getNondiscardedCase(context)) {
      collect_calls(*taken, context, calls);
    }
    return;
  }
  if (const auto* branch = llvm::dyn_cast<clang::IfStmt>(stmt); branch && branch->isConsteval()) {
    // A guarded function is never constant-evaluated: only the other branch runs.
    collect_calls(branch->isNegatedConsteval() ? branch->getThen() : branch->getElse(), context,
                  calls);
    return;
  }
  if (const auto* call = llvm::dyn_cast<clang::CallExpr>(stmt)) {
    if (call->getBuiltinCallee() == clang::Builtin::BI__builtin_constant_p) return;
    calls.push_back(call);
  }
  for (const clang::Stmt* child : stmt->children()) collect_calls(child, context, calls);
}

const clang::ParmVarDecl* parameter_named(const clang::Expr* expression) {
  const auto* reference = llvm::dyn_cast<clang::DeclRefExpr>(expression->IgnoreParenImpCasts());
  return reference ? llvm::dyn_cast<clang::ParmVarDecl>(reference->getDecl()) : nullptr;
}

// The parameters a body may change: any use of one other than reading its value or binding
// it to a reference to const (`id = 2`, `++id`, `&id`, `id.clear()`, a lambda's `id++`).
class ChangedParameters {
 public:
  explicit ChangedParameters(const clang::Stmt* body) {
    walk(body);
    for (const clang::DeclRefExpr* use : uses_) {
      if (!reads_.count(use)) changed_.insert(use->getDecl());
    }
  }

  [[nodiscard]] bool changed(const clang::ParmVarDecl* parameter) const {
    const clang::QualType type = parameter->getType();
    const bool constant =
        type.isConstQualified() ||
        (type->isReferenceType() && type.getNonReferenceType().isConstQualified());
    return !constant && changed_.count(parameter) > 0;
  }

 private:
  void walk(const clang::Stmt* stmt) {
    if (!stmt) return;
    if (const auto* use = llvm::dyn_cast<clang::DeclRefExpr>(stmt);
        use && llvm::isa<clang::ParmVarDecl>(use->getDecl())) {
      uses_.push_back(use);
    }
    if (const auto* cast = llvm::dyn_cast<clang::ImplicitCastExpr>(stmt);
        cast && cast->getCastKind() == clang::CK_LValueToRValue) {
      mark_read(cast->getSubExpr());
    }
    if (const auto* call = llvm::dyn_cast<clang::CallExpr>(stmt)) mark_const_bindings(*call);
    if (const auto* lambda = llvm::dyn_cast<clang::LambdaExpr>(stmt)) walk(lambda->getBody());
    for (const clang::Stmt* child : stmt->children()) walk(child);
  }

  void mark_read(const clang::Expr* expression) {
    const auto* use = llvm::dyn_cast<clang::DeclRefExpr>(expression->IgnoreParenImpCasts());
    if (use) reads_.insert(use);
  }

  void mark_const_bindings(const clang::CallExpr& call) {
    const clang::FunctionDecl* callee = call.getDirectCallee();
    if (!callee) return;
    // A member operator's first argument is the object.
    const unsigned shift = llvm::isa<clang::CXXOperatorCallExpr>(call) &&
                                   llvm::isa<clang::CXXMethodDecl>(callee) &&
                                   !llvm::cast<clang::CXXMethodDecl>(callee)->isStatic()
                               ? 1
                               : 0;
    for (unsigned i = shift; i < call.getNumArgs() && i - shift < callee->getNumParams(); ++i) {
      const clang::QualType type = callee->getParamDecl(i - shift)->getType();
      if (type->isLValueReferenceType() && type.getNonReferenceType().isConstQualified()) {
        mark_read(call.getArg(i));
      }
    }
  }

  std::vector<const clang::DeclRefExpr*> uses_;
  std::set<const clang::DeclRefExpr*> reads_;
  std::set<const clang::ValueDecl*> changed_;
};

// The index of the parameter a placeholder names, in the function the guard is written on.
std::optional<unsigned> parameter_index(const Placeholder& placeholder,
                                        const clang::FunctionDecl& function) {
  if (placeholder.root == "this") return std::nullopt;
  for (unsigned i = 0; i < function.getNumParams(); ++i) {
    const clang::ParmVarDecl* parameter = function.getParamDecl(i);
    if (parameter->getName() == placeholder.root && !parameter->isParameterPack()) return i;
  }
  return std::nullopt;
}

bool same_members(const Placeholder& a, const Placeholder& b) {
  return std::equal(a.members.begin(), a.members.end(), b.members.begin(), b.members.end(),
                    [](const MemberStep& x, const MemberStep& y) {
                      return x.access == y.access && x.name == y.name;
                    });
}

class UpgradeChecker {
 public:
  UpgradeChecker(clang::ASTContext& context, const std::vector<CheckedGuard>& guards)
      : context_(context), report_(context) {
    for (const CheckedGuard& guard : guards) {
      by_function_.emplace(guard.declaration->getCanonicalDecl(), &guard);
    }
  }

  void check(const CheckedGuard& caller) {
    if (!is_shared(caller.spec) || !caller.definition || !caller.definition->getBody()) return;
    const clang::Stmt* body = caller.definition->getBody();
    const ChangedParameters changes(body);
    std::vector<const clang::CallExpr*> calls;
    collect_calls(body, context_, calls);
    for (const clang::CallExpr* call : calls) {
      const clang::FunctionDecl* callee = call->getDirectCallee();
      const CheckedGuard* guard = callee ? guard_of(*callee) : nullptr;
      if (!guard || !is_exclusive(guard->spec) || guard->spec.policy != caller.spec.policy) {
        continue;
      }
      for (const KeyTemplate& key : caller.spec.keys) {
        if (upgrades(caller, key, *call, *callee, *guard, changes)) {
          report(caller, key, *call, *guard);
          break;
        }
      }
    }
  }

 private:
  // The callee's guard: its own, or that of the template it was instantiated from. A virtual
  // call may run another function, and an operator call's arguments are shifted: neither is
  // certain.
  const CheckedGuard* guard_of(const clang::FunctionDecl& callee) const {
    if (const auto* method = llvm::dyn_cast<clang::CXXMethodDecl>(&callee);
        method && method->isVirtual()) {
      return nullptr;
    }
    if (callee.isOverloadedOperator()) return nullptr;
    const clang::FunctionDecl* pattern = callee.getTemplateInstantiationPattern(false);
    for (const clang::FunctionDecl* function : {&callee, pattern}) {
      if (!function) continue;
      if (const auto found = by_function_.find(function->getCanonicalDecl());
          found != by_function_.end()) {
        return found->second;
      }
    }
    return nullptr;
  }

  // Whether one of the callee's keys is certainly `key` of the caller at this call.
  bool upgrades(const CheckedGuard& caller, const KeyTemplate& key, const clang::CallExpr& call,
                const clang::FunctionDecl& callee, const CheckedGuard& guard,
                const ChangedParameters& changes) const {
    for (const KeyTemplate& theirs : guard.spec.keys) {
      if (theirs.format != key.format || theirs.placeholders.size() != key.placeholders.size()) {
        continue;
      }
      bool same = true;
      for (std::size_t i = 0; same && i < key.placeholders.size(); ++i) {
        same = passes_through(caller, key.placeholders[i], call, callee, guard,
                              theirs.placeholders[i], changes);
      }
      if (same) return true;
    }
    return false;
  }

  // Whether the callee's placeholder gets the caller's placeholder's value at this call.
  bool passes_through(const CheckedGuard& caller, const Placeholder& ours,
                      const clang::CallExpr& call, const clang::FunctionDecl& callee,
                      const CheckedGuard& guard, const Placeholder& theirs,
                      const ChangedParameters& changes) const {
    const auto our_index = parameter_index(ours, *caller.declaration);
    const auto their_index = parameter_index(theirs, *guard.declaration);
    if (!our_index || !their_index || !same_members(ours, theirs) ||
        *their_index >= call.getNumArgs() || *their_index >= callee.getNumParams() ||
        *our_index >= caller.definition->getNumParams()) {
      return false;
    }
    const clang::ParmVarDecl* our_parameter = caller.definition->getParamDecl(*our_index);
    const clang::QualType our_type = our_parameter->getType().getNonReferenceType();
    const clang::QualType their_type =
        callee.getParamDecl(*their_index)->getType().getNonReferenceType();
    return parameter_named(call.getArg(*their_index)) == our_parameter &&
           !our_type->isDependentType() && context_.hasSameUnqualifiedType(our_type, their_type) &&
           !changes.changed(our_parameter);
  }

  void report(const CheckedGuard& caller, const KeyTemplate& key, const clang::CallExpr& call,
              const CheckedGuard& guard) {
    report_.error(call.getExprLoc(), call.getSourceRange(),
                  "exclusive guard '" + guard.name + "' called inside shared guard '" +
                      caller.name + "' on lock key \"" + key_text(key) +
                      "\": an upgrade, which dlock refuses (it would deadlock)");
    report_.note(caller.attribute, "shared guard given here");
  }

  clang::ASTContext& context_;
  Reporter report_;
  std::map<const clang::FunctionDecl*, const CheckedGuard*> by_function_;
};

}  // namespace

void check_upgrades(clang::ASTContext& context, const std::vector<CheckedGuard>& guards) {
  UpgradeChecker checker(context, guards);
  for (const CheckedGuard& guard : guards) checker.check(guard);
}

}  // namespace dlock::codegen
