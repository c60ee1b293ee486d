// An inline definition in a header is compiled from every source that includes it, and
// none of them weaves headers.
#pragma once

[[dlock::guard("inline")]] inline void refresh() {}
