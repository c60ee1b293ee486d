// A project header with an inline guarded definition.
#pragma once

[[dlock::guard("inline")]] inline void refresh() {}
