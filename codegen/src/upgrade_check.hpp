// An exclusive guard called inside a shared guard on the same key: an upgrade, which the
// runtime refuses (DESIGN §7). Found where one translation unit shows both guards.
//
//   [[dlock::guard("doc:<id>", mode=shared)]] std::string render(long id) { edit(id, {}); }
//   [[dlock::guard("doc:<id>")]] void edit(long id, const Patch& p);
//   -> error at `edit(id, {})`, with a note at render's guard
//
// Only what is certain is reported: a direct, non-virtual call in the shared guard's body (not
// in a lambda or a local class, which may run elsewhere; not in an unevaluated operand or a
// discarded `if constexpr` branch) to an exclusive guard with the same policy, one of whose
// keys has the format of one of the caller's keys, with every placeholder's parameter passed
// the caller's parameter of the placeholder at the same position (the same member chain and
// the same type, the parameter never changed in the body).
#pragma once

#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/Basic/SourceLocation.h>

#include <string>
#include <vector>

#include "dlock/codegen/guard_spec.hpp"

namespace dlock::codegen {

/// A guard whose arguments and placeholders checked out.
struct CheckedGuard {
  const clang::FunctionDecl* declaration = nullptr;  ///< the one the guard is written on
  const clang::FunctionDecl* definition = nullptr;   ///< with the body; null when elsewhere
  std::string name;                                  ///< the guard's name
  GuardSpec spec;
  clang::SourceLocation attribute;
};

/// Reports every call that upgrades a shared guard's key to an exclusive one.
void check_upgrades(clang::ASTContext& context, const std::vector<CheckedGuard>& guards);

}  // namespace dlock::codegen
