// The Lua scripts of runtime/lua, embedded at build time and run by SHA.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "redis/connection.hpp"

namespace dlock::internal {

struct Script {
  std::string_view name;
  std::string_view text;
  std::string sha;  ///< SHA-1 of text, as Redis names it
};

const Script& acquire_script();
const Script& renew_script();
const Script& release_script();

/// EVALSHA, falling back to EVAL (which also caches the script) after NOSCRIPT, as after
/// a SCRIPT FLUSH or on a server that restarted.
Reply run_script(Connection& conn, const Script& script, const std::vector<std::string_view>& keys,
                 const std::vector<std::string_view>& args);

/// The same for pipelines: queue the EVALSHA now; if its reply is NOSCRIPT, rerun it with
/// run_script().
void append_script(Connection& conn, const Script& script, const std::vector<std::string_view>& keys,
                   const std::vector<std::string_view>& args);
[[nodiscard]] bool is_noscript(const Reply& reply);

}  // namespace dlock::internal
