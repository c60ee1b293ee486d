// A guarded definition in a system header (-isystem, or as here marked so) is refused: the
// compiler finds such headers through their own search paths, so a woven copy could not
// stand in for it.
#include "system_definition.hpp"
// CHECK: system_definition.hpp:6:5: error: a guarded definition in system header '%S/system_definition.hpp' cannot be woven; put the header's directory on -I, not -isystem (docs/GUARD.md, Known limits)
// CHECK: system_definition.hpp:6:42: note: the definition is here

void use() { refresh(); }
