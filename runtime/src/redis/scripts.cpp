#include "redis/scripts.hpp"

#include "lua_scripts.hpp"
#include "redis/sha1.hpp"

namespace dlock::internal {
namespace {

Script make(std::string_view name, std::string_view text) {
  return Script{name, text, sha1_hex(text)};
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

}  // namespace

const Script& acquire_script() {
  static const Script s = make("acquire", lua::kAcquireLua);
  return s;
}
const Script& renew_script() {
  static const Script s = make("renew", lua::kRenewLua);
  return s;
}
const Script& release_script() {
  static const Script s = make("release", lua::kReleaseLua);
  return s;
}

bool is_noscript(const Reply& reply) {
  return reply.ok() && reply.is_error() && reply.text().substr(0, 8) == "NOSCRIPT";
}

void append_script(Connection& conn, const Script& script, const std::vector<std::string_view>& keys,
                   const std::vector<std::string_view>& args) {
  std::string nkeys;
  conn.append(eval_argv("EVALSHA", script.sha, keys, args, nkeys));
}

Reply run_script(Connection& conn, const Script& script, const std::vector<std::string_view>& keys,
                 const std::vector<std::string_view>& args) {
  std::string nkeys;
  Reply reply = conn.command(eval_argv("EVALSHA", script.sha, keys, args, nkeys));
  if (!is_noscript(reply)) return reply;
  return conn.command(eval_argv("EVAL", script.text, keys, args, nkeys));
}

}  // namespace dlock::internal
