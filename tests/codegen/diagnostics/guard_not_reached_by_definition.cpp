// A guard on a declaration in one header, the inline definition in another header that does
// not include it: a source including only the defining header would compile it without the
// lock (and the linker keeps either copy), so it is an error.
#include "declares_refresh.hpp"
#include "defines_refresh.hpp"
// CHECK: declares_refresh.hpp:4:3: error: this guard's function is defined in '%S/defines_refresh.hpp', which does not include '%S/declares_refresh.hpp': a source including only the former would compile it without the lock; include this header there, or put the guard on the definition

void use() { refresh_all(); }
