// A project header that defines a guarded function, reached only through a system header,
// is a system header too (found next to one): refused like any guard in a system header.
#include "system_wrapper.hpp"
// CHECK: defines_guard.hpp:4:3: error: a guarded definition in system header '%S/defines_guard.hpp' cannot be woven: put its directory on -I, not -isystem, and include it from project files (a header first included by a system header is one too)
// CHECK: defines_guard.hpp:4:40: note: the definition is here

void use() { refresh(); }
