// A guarded definition in a system header (-isystem, or as here marked so) is refused: the
// compiler finds such headers through their own search paths, so a woven copy could not
// stand in for it.
#include "system_definition.hpp"
// CHECK: system_definition.hpp:6:5: error: a guarded definition in system header '%S/system_definition.hpp' cannot be woven: put its directory on -I, not -isystem, and include it from project files (a header first included by a system header is one too)
// CHECK: system_definition.hpp:6:42: note: the definition is here

void use() { refresh(); }
