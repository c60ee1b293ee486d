// A header the compiler treats as a system header, defining a guarded function.
#pragma once
#pragma GCC system_header

// The guard's own line:
  [[dlock::guard("inline")]] inline void refresh() {}
