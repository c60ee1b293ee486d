#include "guard_attribute.hpp"

#include <clang/AST/Decl.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Sema/ParsedAttr.h>
#include <clang/Sema/Sema.h>

#include <string>

namespace dlock::codegen {
namespace {

// clang instantiates registered attribute handlers itself, so the collector of the current
// run is reached through this (one translation unit per thread at a time).
thread_local GuardCollector* current_collector = nullptr;

class GuardAttrInfo : public clang::ParsedAttrInfo {
 public:
  GuardAttrInfo() {
    static constexpr Spelling kSpellings[] = {{clang::ParsedAttr::AS_CXX11, "dlock::guard"}};
    Spellings = kSpellings;
    // clang does not parse a plugin attribute's arguments; allow any count so that it
    // never complains about them.
    OptArgs = 15;
  }

  bool diagAppertainsToDecl(clang::Sema& sema, const clang::ParsedAttr& attr,
                            const clang::Decl* decl) const override {
    if (llvm::isa<clang::FunctionDecl>(decl)) return true;
    return misplaced(
        sema, attr,
        "'dlock::guard' applies to functions only; guard the function that does the work");
  }

  bool diagAppertainsToStmt(clang::Sema& sema, const clang::ParsedAttr& attr,
                            const clang::Stmt*) const override {
    return misplaced(sema, attr, "'dlock::guard' applies to functions, not statements");
  }

  AttrHandling handleDeclAttribute(clang::Sema&, clang::Decl* decl,
                                   const clang::ParsedAttr& attr) const override {
    auto* function = llvm::dyn_cast<clang::FunctionDecl>(decl);
    if (function && current_collector) {
      // The range runs from the scope name (`dlock`) to the attribute name (`guard`).
      current_collector->add({function, attr.getRange().getBegin(), attr.getRange().getEnd()});
    }
    return AttributeApplied;
  }

 private:
  // Reports a guard written where no function is (and tells the collector); always false.
  static bool misplaced(clang::Sema& sema, const clang::ParsedAttr& attr,
                        const std::string& message) {
    if (current_collector) current_collector->add_misplaced(attr.getRange().getEnd());
    const unsigned id =
        sema.getDiagnostics().getCustomDiagID(clang::DiagnosticsEngine::Error, "%0");
    sema.Diag(attr.getLoc(), id) << message << attr.getRange();
    return false;
  }
};

const clang::ParsedAttrInfoRegistry::Add<GuardAttrInfo> kRegistration(
    "dlock-guard", "[[dlock::guard(...)]]: a distributed lock around a function");

}  // namespace

ScopedGuardCollection::ScopedGuardCollection(GuardCollector& collector)
    : previous_(current_collector) {
  current_collector = &collector;
}

ScopedGuardCollection::~ScopedGuardCollection() { current_collector = previous_; }

}  // namespace dlock::codegen
