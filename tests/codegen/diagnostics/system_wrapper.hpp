// A system header (so marked) that includes a project header defining a guard.
#pragma once
#pragma GCC system_header

#include "defines_guard.hpp"
