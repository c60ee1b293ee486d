// One placeholder of a lock key checked against the guarded function: its root against the
// parameters (or `this`), then each `.member` / `->member` against the record types.
#pragma once

#include <clang/AST/Decl.h>
#include <clang/Basic/SourceLocation.h>

#include <optional>
#include <string>

#include "dlock/codegen/key_template.hpp"
#include "reporter.hpp"

namespace dlock::codegen {

/// The C++ expression for the placeholder in the definition's body, or nullopt after
/// reporting why there is none. `definition` may be null (a declaration only, here).
[[nodiscard]] std::optional<std::string> check_placeholder(
    clang::ASTContext& context, Reporter& report, const Placeholder& placeholder,
    const clang::FunctionDecl& declaration, const clang::FunctionDecl* definition,
    clang::FileID file);

}  // namespace dlock::codegen
