// The definition of a function guarded in another header, inline in a header that does not
// mention dlock::guard: the generator must still see its body and refuse it.
#pragma once

#include "guarded_declaration.hpp"

inline void refresh_everything() {}
