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
const Script& acquire_shared_script();
const Script& acquire_together_script();
const Script& release_together_script();

/// EVALSHA, falling back to EVAL (which also caches the script) after NOSCRIPT, as after
/// a SCRIPT FLUSH or on a server that restarted.
Reply run_script(Connection& conn, const Script& script, const std::vector<std::string_view>& keys,
                 const std::vector<std::string_view>& args);

/// One script invocation that owns its keys and arguments, so that it can be queued in a
/// pipeline, sent to several servers, and sent again after NOSCRIPT or a redirect.
struct ScriptCall {
  const Script* script = nullptr;
  std::vector<std::string> keys;
  std::vector<std::string> args;

  /// Like run_script(). With `asking` (after a cluster ASK redirect), every attempt is
  /// preceded by ASKING, which admits only the one command after it.
  Reply run(Connection& conn, bool asking = false) const;
  /// Queues EVALSHA (eval: EVAL) without reading the reply.
  void append(Connection& conn, bool eval = false) const;
};

/// Sends `calls` as one pipeline, then `trailer` (a plain command such as WAIT) when it is
/// not empty, and returns one reply per call plus one for the trailer. Calls answered
/// NOSCRIPT are sent again with EVAL, followed by the trailer again, whose later reply
/// replaces the first. After a failed read the remaining replies carry that failure.
std::vector<Reply> run_pipeline(Connection& conn, const std::vector<const ScriptCall*>& calls,
                                const std::vector<std::string_view>& trailer = {});

}  // namespace dlock::internal
