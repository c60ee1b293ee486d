// The corpus entry points, one per source; each returns true when every guard it called
// held its lock in the body. `base` keeps keys apart between callers.
#pragma once

namespace corpus {

bool run_classic(long base);    // C++17 and later
bool run_modern(long base);     // C++20 and later
bool run_libraries(long base);  // C++17 and later: Boost.Asio, nlohmann/json, spdlog, abseil, protobuf

}  // namespace corpus
