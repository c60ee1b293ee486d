// Teaches clang the attribute `[[dlock::guard(...)]]` and hands each one to a collector.
//
//   GuardCollector collector;
//   ScopedGuardCollection scope(collector);   // while clang parses this translation unit
//   ... run clang ...
//   for (const WrittenGuard& guard : collector.guards()) { ... }
//
// Plain clang drops unknown attributes; a registered ParsedAttrInfo gets the declaration and
// the attribute's location (clang skips a plugin attribute's arguments; attribute_lexer
// reads them back).
// Each written attribute is reported exactly once, with the declaration it is written on,
// before any redeclaration inherits it, so the generator never loses or doubles a guard.
#pragma once

#include <clang/Basic/SourceLocation.h>

#include <vector>

namespace clang {
class Decl;
class FunctionDecl;
}  // namespace clang

namespace dlock::codegen {

/// One `dlock::guard` as written: the declaration it is on, and where `dlock` and `guard` are.
struct WrittenGuard {
  clang::FunctionDecl* decl = nullptr;
  clang::SourceLocation scope_loc;  ///< `dlock`
  clang::SourceLocation name_loc;   ///< `guard`
};

/// Collects the guards of one translation unit, in source order.
class GuardCollector {
 public:
  /// A guard on a function.
  void add(WrittenGuard guard) {
    guards_.push_back(guard);
    seen_.push_back(guard.name_loc);
  }
  /// A guard clang applied to something else, and has already reported.
  void add_misplaced(clang::SourceLocation name_loc) {
    seen_.push_back(name_loc);
    ++misplaced_;
  }

  [[nodiscard]] const std::vector<WrittenGuard>& guards() const { return guards_; }
  /// Where the `guard` of every attribute clang handed over is: the generator checks that no
  /// guard in the source escaped clang's attention.
  [[nodiscard]] const std::vector<clang::SourceLocation>& seen() const { return seen_; }
  /// How many of the guards clang handed over were misplaced (each an error already).
  [[nodiscard]] unsigned misplaced() const { return misplaced_; }

 private:
  std::vector<WrittenGuard> guards_;
  std::vector<clang::SourceLocation> seen_;
  unsigned misplaced_ = 0;
};

/// Routes the guards clang parses on this thread to `collector` while it lives.
class ScopedGuardCollection {
 public:
  explicit ScopedGuardCollection(GuardCollector& collector);
  ~ScopedGuardCollection();
  ScopedGuardCollection(const ScopedGuardCollection&) = delete;
  ScopedGuardCollection& operator=(const ScopedGuardCollection&) = delete;

 private:
  GuardCollector* previous_;
};

}  // namespace dlock::codegen
