// A guarded definition in a header is an error, never silently unguarded.
#include "definition_in_header.hpp"
// CHECK: definition_in_header.hpp:5:3: error: guarded definitions must be in a woven source file; the definition in header '%S/definition_in_header.hpp' is not woven
// CHECK: definition_in_header.hpp:5:40: note: the definition is here

void use() { refresh(); }
