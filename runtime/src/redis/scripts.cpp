#include "redis/scripts.hpp"

#include "lua_scripts.hpp"
#include "redis/sha1.hpp"

namespace dlock::internal {
namespace {

Script make(std::string_view name, std::string_view text) {
  return Script{name, text, sha1_hex(text)};
}

// A lock script that meets shared holds and permits, with the functions of holders.lua before
// it. The caller keeps the text in a static pointer, as it keeps the script: never destroyed
// (see below).
std::string* with_holders(std::string_view text) {
  return new std::string(std::string(lua::kHoldersLua) + std::string(text));
}

// A script that releases locks: release_lock.lua, after holders.lua, before it.
std::string* with_releases(std::string_view text) {
  return new std::string(std::string(lua::kHoldersLua) + std::string(lua::kReleaseLockLua) +
                         std::string(text));
}

std::vector<std::string_view> eval_argv(std::string_view verb, std::string_view body,
                                        const std::vector<std::string_view>& keys,
                                        const std::vector<std::string_view>& args,
                                        std::string& nkeys) {
  nkeys = std::to_string(keys.size());
  std::vector<std::string_view> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back(verb);
  argv.push_back(body);
  argv.push_back(nkeys);
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::vector<std::string_view> views(const std::vector<std::string>& strings) {
  return {strings.begin(), strings.end()};
}

bool is_noscript(const Reply& reply) { return reply.server_error() == ServerError::kNoScript; }

}  // namespace

// The scripts are used by the watchdog thread, which may still be running while static
// objects are destroyed at exit (the process-wide client goes last); so they are never
// destroyed.
const Script& acquire_script() {
  static const std::string* text = with_holders(lua::kAcquireLua);
  static const Script* s = new Script(make("acquire", *text));
  return *s;
}
const Script& renew_script() {
  static const std::string* text = with_holders(lua::kRenewLua);
  static const Script* s = new Script(make("renew", *text));
  return *s;
}
const Script& release_script() {
  static const std::string* text = with_releases(lua::kReleaseLua);
  static const Script* s = new Script(make("release", *text));
  return *s;
}
const Script& release_together_script() {
  static const std::string* text = with_releases(lua::kReleaseTogetherLua);
  static const Script* s = new Script(make("release_together", *text));
  return *s;
}
const Script& acquire_together_script() {
  static const std::string* text = with_holders(lua::kAcquireTogetherLua);
  static const Script* s = new Script(make("acquire_together", *text));
  return *s;
}
const Script& acquire_shared_script() {
  static const std::string* text = with_holders(lua::kAcquireSharedLua);
  static const Script* s = new Script(make("acquire_shared", *text));
  return *s;
}

Reply run_script(Connection& conn, const Script& script, const std::vector<std::string_view>& keys,
                 const std::vector<std::string_view>& args) {
  std::string nkeys;
  Reply reply = conn.command(eval_argv("EVALSHA", script.sha, keys, args, nkeys));
  if (!is_noscript(reply)) return reply;
  return conn.command(eval_argv("EVAL", script.text, keys, args, nkeys));
}

void ScriptCall::append(Connection& conn, bool eval) const {
  std::string nkeys;
  conn.append(eval_argv(eval ? "EVAL" : "EVALSHA", eval ? script->text : script->sha, views(keys),
                        views(args), nkeys));
}

Reply ScriptCall::run(Connection& conn, bool asking) const {
  if (!asking) return run_script(conn, *script, views(keys), views(args));
  for (bool eval : {false, true}) {
    conn.append({"ASKING"});
    append(conn, eval);
    Reply ok = conn.read_reply();
    if (!ok.ok()) return ok;
    Reply reply = conn.read_reply();
    if (!is_noscript(reply)) return reply;
  }
  return Reply::failed(Reply::Status::kBroken, "NOSCRIPT after EVAL");
}

std::vector<Reply> run_pipeline(Connection& conn, const std::vector<const ScriptCall*>& calls,
                                const std::vector<std::string_view>& trailer) {
  const std::size_t total = calls.size() + (trailer.empty() ? 0 : 1);
  std::vector<Reply> replies;
  replies.reserve(total);
  auto fail_rest = [&](const Reply& failure) {
    while (replies.size() < total)
      replies.push_back(Reply::failed(failure.status(), failure.error()));
    return std::move(replies);
  };
  for (const ScriptCall* call : calls) call->append(conn);
  if (!trailer.empty()) conn.append(trailer);
  std::vector<std::size_t> unknown_script;
  for (std::size_t i = 0; i < total; ++i) {
    Reply reply = conn.read_reply();
    if (!reply.ok()) return fail_rest(reply);
    if (i < calls.size() && is_noscript(reply)) unknown_script.push_back(i);
    replies.push_back(std::move(reply));
  }
  if (unknown_script.empty()) return replies;
  for (std::size_t i : unknown_script) calls[i]->append(conn, true);
  if (!trailer.empty()) conn.append(trailer);
  for (std::size_t i : unknown_script) replies[i] = conn.read_reply();
  if (!trailer.empty()) replies.back() = conn.read_reply();
  return replies;
}

}  // namespace dlock::internal
