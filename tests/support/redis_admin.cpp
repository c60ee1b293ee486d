// RedisAdmin: a small synchronous hiredis client for tests.
#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <utility>

#include <fmt/format.h>

#include "process_support.hpp"
#include "redis_process.hpp"

namespace dlock::test {

using namespace detail;

namespace {

void flatten(const redisReply* reply, std::string& out) {
  switch (reply->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      out.append(reply->str, reply->len);
      break;
    case REDIS_REPLY_INTEGER:
      out += std::to_string(reply->integer);
      break;
    case REDIS_REPLY_NIL:
      out += "(nil)";
      break;
    case REDIS_REPLY_ARRAY:
      for (std::size_t i = 0; i < reply->elements; ++i) {
        if (i > 0) out += '\n';
        flatten(reply->element[i], out);
      }
      break;
    default:
      out += "(unknown reply type)";
  }
}

void collect(const redisReply* reply, std::vector<std::string>& out) {
  switch (reply->type) {
    case REDIS_REPLY_ARRAY:
      for (std::size_t i = 0; i < reply->elements; ++i) collect(reply->element[i], out);
      break;
    case REDIS_REPLY_NIL:
      out.emplace_back();
      break;
    default: {
      std::string text;
      flatten(reply, text);
      out.push_back(std::move(text));
    }
  }
}

const char* type_name(int type) {
  switch (type) {
    case REDIS_REPLY_STRING: return "string";
    case REDIS_REPLY_ARRAY: return "array";
    case REDIS_REPLY_INTEGER: return "integer";
    case REDIS_REPLY_NIL: return "nil";
    case REDIS_REPLY_STATUS: return "status";
    case REDIS_REPLY_ERROR: return "error";
    default: return "unknown";
  }
}

[[noreturn]] void wrong_type(const std::vector<std::string>& argv, const char* expected,
                             const redisReply* reply) {
  std::string text;
  flatten(reply, text);
  throw std::runtime_error(fmt::format("{}: expected a{} {} reply, got {} '{}'", join(argv),
                                       expected[0] == 'a' || expected[0] == 'i' ? "n" : "",
                                       expected, type_name(reply->type), text));
}

timeval to_timeval(milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  return tv;
}

}  // namespace

void RedisAdmin::ReplyDeleter::operator()(void* reply) const noexcept {
  if (reply != nullptr) freeReplyObject(reply);
}

RedisAdmin::RedisAdmin(std::string host, int port, milliseconds timeout)
    : host_(std::move(host)), port_(port), timeout_(timeout) {
  install_process_safety_net();
}

RedisAdmin::RedisAdmin(const RedisServer& server, milliseconds timeout)
    : RedisAdmin(server.host(), server.port(), timeout) {}

RedisAdmin::~RedisAdmin() { disconnect(); }

RedisAdmin::RedisAdmin(RedisAdmin&& other) noexcept
    : host_(std::move(other.host_)),
      port_(other.port_),
      timeout_(other.timeout_),
      username_(std::move(other.username_)),
      password_(std::move(other.password_)),
      context_(std::exchange(other.context_, nullptr)) {}

RedisAdmin& RedisAdmin::operator=(RedisAdmin&& other) noexcept {
  if (this != &other) {
    disconnect();
    host_ = std::move(other.host_);
    port_ = other.port_;
    timeout_ = other.timeout_;
    username_ = std::move(other.username_);
    password_ = std::move(other.password_);
    context_ = std::exchange(other.context_, nullptr);
  }
  return *this;
}

void RedisAdmin::set_auth(std::string username, std::string password) {
  username_ = std::move(username);
  password_ = std::move(password);
  disconnect();
}

void RedisAdmin::disconnect() noexcept {
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
}

void RedisAdmin::connect() {
  redisContext* context = redisConnectWithTimeout(host_.c_str(), port_, to_timeval(timeout_));
  if (context == nullptr) {
    throw RedisIoError(fmt::format("cannot connect to {}:{}: out of memory", host_, port_));
  }
  if (context->err != 0) {
    const std::string reason = context->errstr;
    redisFree(context);
    throw RedisIoError(fmt::format("cannot connect to {}:{}: {}", host_, port_, reason));
  }
  redisSetTimeout(context, to_timeval(timeout_));
  context_ = context;
  if (!password_.empty()) {
    try {
      if (username_.empty()) {
        execute({"AUTH", password_});
      } else {
        execute({"AUTH", username_, password_});
      }
    } catch (...) {
      disconnect();
      throw;
    }
  }
}

void RedisAdmin::fail_io(const std::string& what) {
  const int saved_errno = errno;
  std::string reason = context_ != nullptr ? context_->errstr : "no connection";
  if (context_ != nullptr && context_->err == REDIS_ERR_IO &&
      (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK ||
       reason.find("temporarily unavailable") != std::string::npos)) {
    reason = fmt::format("no reply within {} ms", timeout_.count());
  }
  disconnect();  // a broken or timed-out connection is never reused
  throw RedisIoError(fmt::format("{}:{}: {}: {}", host_, port_, what, reason));
}

RedisAdmin::ReplyPtr RedisAdmin::execute(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("RedisAdmin: empty command");
  const bool fresh = context_ == nullptr;
  if (fresh) connect();
  std::vector<const char*> pointers;
  std::vector<std::size_t> lengths;
  pointers.reserve(argv.size());
  lengths.reserve(argv.size());
  for (const auto& arg : argv) {
    pointers.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  errno = 0;
  void* raw = redisCommandArgv(context_, static_cast<int>(argv.size()), pointers.data(),
                               lengths.data());
  if (raw == nullptr && !fresh) {
    // A connection kept from before a server restart fails on first use without the command
    // having reached any server: reconnect once. Timeouts are not retried.
    const int error = errno;
    const bool stale = context_->err == REDIS_ERR_EOF ||
                       (context_->err == REDIS_ERR_IO && (error == EPIPE || error == ECONNRESET));
    if (stale) {
      disconnect();
      connect();
      errno = 0;
      raw = redisCommandArgv(context_, static_cast<int>(argv.size()), pointers.data(),
                             lengths.data());
    }
  }
  if (raw == nullptr) fail_io(argv.front());
  ReplyPtr reply(raw);
  const auto* typed = static_cast<const redisReply*>(raw);
  if (typed->type == REDIS_REPLY_ERROR) throw RedisError(std::string(typed->str, typed->len));
  return reply;
}

std::string RedisAdmin::command(const std::vector<std::string>& argv) {
  const ReplyPtr reply = execute(argv);
  std::string out;
  flatten(static_cast<const redisReply*>(reply.get()), out);
  return out;
}

long long RedisAdmin::integer(const std::vector<std::string>& argv) {
  const ReplyPtr reply = execute(argv);
  const auto* typed = static_cast<const redisReply*>(reply.get());
  if (typed->type != REDIS_REPLY_INTEGER) wrong_type(argv, "integer", typed);
  return typed->integer;
}

std::optional<std::string> RedisAdmin::string(const std::vector<std::string>& argv) {
  const ReplyPtr reply = execute(argv);
  const auto* typed = static_cast<const redisReply*>(reply.get());
  if (typed->type == REDIS_REPLY_NIL) return std::nullopt;
  if (typed->type != REDIS_REPLY_STRING && typed->type != REDIS_REPLY_STATUS) {
    wrong_type(argv, "string", typed);
  }
  return std::string(typed->str, typed->len);
}

std::vector<std::string> RedisAdmin::array(const std::vector<std::string>& argv) {
  const ReplyPtr reply = execute(argv);
  const auto* typed = static_cast<const redisReply*>(reply.get());
  if (typed->type != REDIS_REPLY_ARRAY) wrong_type(argv, "array", typed);
  std::vector<std::string> out;
  collect(typed, out);
  return out;
}

bool RedisAdmin::ok(const std::vector<std::string>& argv) {
  const ReplyPtr reply = execute(argv);
  const auto* typed = static_cast<const redisReply*>(reply.get());
  return typed->type == REDIS_REPLY_STATUS && std::string_view(typed->str, typed->len) == "OK";
}

bool RedisAdmin::ping() noexcept {
  try {
    return command({"PING"}) == "PONG";
  } catch (...) {
    return false;
  }
}

std::optional<std::string> RedisAdmin::info_field(const std::string& section,
                                                  std::string_view field) {
  const auto text = string({"INFO", section});
  if (!text) return std::nullopt;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.size() > field.size() && line.compare(0, field.size(), field) == 0 &&
        line[field.size()] == ':') {
      return line.substr(field.size() + 1);
    }
  }
  return std::nullopt;
}

}  // namespace dlock::test
