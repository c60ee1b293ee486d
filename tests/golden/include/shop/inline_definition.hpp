// The definition of a function guarded in another header, inline in a header that does not
// mention dlock::guard: its copy is woven; the guard stays on the declaration.
#pragma once

#include "guarded_declaration.hpp"

inline void refresh_everything() {}
