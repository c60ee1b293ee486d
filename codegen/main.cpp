// dlock-codegen: weaves [[dlock::guard(...)]] into plain C++. See `dlock-codegen --help`
// and codegen/README.md; everything but the entry point lives in the dlock_codegen library.
#include <llvm/Support/InitLLVM.h>

#include "dlock/codegen/driver.hpp"

int main(int argc, const char** argv) {
  llvm::InitLLVM llvm(argc, argv);  // a stack trace instead of a silent death, were it to crash
  return dlock::codegen::run_main(argc, argv);
}
