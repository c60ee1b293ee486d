// C++ gives an attribute after a parameter list to the function's type, not the function:
// clang says so, and the generator adds that the guard would not be woven.
void (*callback)() [[dlock::guard("type")]];
// CHECK: :[[@LINE-1]]:22: error: 'guard' attribute cannot be applied to types
// CHECK: :[[@LINE-2]]:29: error: this 'dlock::guard' does not apply to a function declaration, so it cannot be woven; write it before the declaration or right after the function's name

// Not guards: a skipped block and a feature test.
#if 0
[[dlock::guard("skipped")]] void skipped();
#endif
#if defined(__has_cpp_attribute) && __has_cpp_attribute(dlock::guard)
#endif
