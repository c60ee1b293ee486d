// A guard on a declaration; defines_refresh.hpp defines the function without including this.
#pragma once

[[dlock::guard("refresh")]] void refresh_all();
