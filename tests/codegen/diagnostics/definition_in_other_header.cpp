// A guarded definition in a header is an error even when the guard is in another header and
// the defining header never mentions dlock::guard (its bodies must not be skipped).
#include "guarded_inline_definition.hpp"
// CHECK: guarded_declaration.hpp:4:3: error: guarded definitions must be in a woven source file; the definition in header '%S/guarded_inline_definition.hpp' is not woven
// CHECK: guarded_inline_definition.hpp:7:13: note: the definition is here

void use() { refresh_everything(); }
