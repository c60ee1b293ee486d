// A guard on a declaration; inline_definition.hpp defines the function inline.
#pragma once

[[dlock::guard("inline")]] void refresh_everything();
