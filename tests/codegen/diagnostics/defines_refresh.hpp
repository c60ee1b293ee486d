// An inline definition of a function guarded in declares_refresh.hpp, which it does not
// include.
#pragma once

inline void refresh_all() {}
