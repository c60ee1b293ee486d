#include "redis/connection.hpp"

#include <dlock/common/text.hpp>

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace dlock::internal {
namespace {

timeval to_timeval(Millis d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

std::int64_t steady_us(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

void to_argv(const std::vector<std::string_view>& argv, std::vector<const char*>& ptrs,
             std::vector<size_t>& lens) {
  ptrs.clear();
  lens.clear();
  for (auto a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
}

}  // namespace

namespace {

sigset_t sigpipe_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

bool sigpipe_pending() {
  sigset_t pending;
  sigemptyset(&pending);
  return sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

}  // namespace

// Guards nest: only the outermost one on a thread touches the signal mask, so that code
// doing many writes in a row (a fan-out to several servers) pays for it once.
thread_local int t_sigpipe_guards = 0;

SigpipeGuard::SigpipeGuard() noexcept {
  if (t_sigpipe_guards++ > 0) return;
  const sigset_t pipe = sigpipe_set();
  was_pending_ = sigpipe_pending();
  if (pthread_sigmask(SIG_BLOCK, &pipe, &previous_) == 0) {
    blocked_here_ = sigismember(&previous_, SIGPIPE) == 0;
  }
}

SigpipeGuard::~SigpipeGuard() {
  --t_sigpipe_guards;
  if (!blocked_here_) return;  // an outer guard, or the caller, blocked it: theirs to handle
  if (!was_pending_ && sigpipe_pending()) {
    const sigset_t pipe = sigpipe_set();
    const timespec no_wait{0, 0};
    sigtimedwait(&pipe, nullptr, &no_wait);
  }
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

std::string to_string(const Endpoint& endpoint) {
  return common::endpoint_text(endpoint.host, endpoint.port);
}

void Reply::Free::operator()(redisReply* r) const noexcept { freeReplyObject(r); }

Reply Reply::ok(redisReply* raw) {
  Reply r;
  r.status_ = Status::kOk;
  r.raw_.reset(raw);
  return r;
}

Reply Reply::failed(Status status, std::string error) {
  Reply r;
  r.status_ = status;
  r.error_ = std::move(error);
  return r;
}

bool Reply::is_error() const noexcept { return raw_ && raw_->type == REDIS_REPLY_ERROR; }
bool Reply::is_integer() const noexcept { return raw_ && raw_->type == REDIS_REPLY_INTEGER; }
long long Reply::integer() const noexcept { return raw_ ? raw_->integer : 0; }

std::string_view Reply::text() const noexcept {
  if (!raw_ || raw_->str == nullptr) return {};
  return {raw_->str, raw_->len};
}

const redisReply* Reply::element(std::size_t i) const noexcept {
  if (!raw_ || raw_->type != REDIS_REPLY_ARRAY || i >= raw_->elements) return nullptr;
  return raw_->element[i];
}

ServerError Reply::server_error() const noexcept {
  if (!is_error()) return ServerError::kNone;
  const std::string_view t = text();
  const std::string_view code = t.substr(0, t.find(' '));
  if (code == "MOVED") return ServerError::kMoved;
  if (code == "ASK") return ServerError::kAsk;
  if (code == "TRYAGAIN") return ServerError::kTryAgain;
  if (code == "CLUSTERDOWN") return ServerError::kClusterDown;
  if (code == "READONLY") return ServerError::kReadOnly;
  if (code == "LOADING" || code == "MASTERDOWN" || code == "UNBLOCKED")
    return ServerError::kNotReady;
  if (code == "NOSCRIPT") return ServerError::kNoScript;
  return ServerError::kOther;
}

std::optional<Redirect> Reply::redirect(const Endpoint& from) const {
  const ServerError kind = server_error();
  if (kind != ServerError::kMoved && kind != ServerError::kAsk) return std::nullopt;
  // "MOVED 3999 127.0.0.1:6381"; IPv6 hosts come without brackets, so split at the last ':'.
  const std::string_view t = text();
  const auto first = t.find(' ');
  const auto second = t.find(' ', first + 1);
  if (first == std::string_view::npos || second == std::string_view::npos) return std::nullopt;
  const std::string_view where = t.substr(second + 1);
  const auto colon = where.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  Redirect out;
  out.slot = std::atoi(std::string(t.substr(first + 1, second - first - 1)).c_str());
  out.target.host = std::string(where.substr(0, colon));
  out.target.port = std::atoi(std::string(where.substr(colon + 1)).c_str());
  if (out.target.host.empty() || out.target.host == "?") out.target.host = from.host;
  // A slot or port out of range is not a redirect we can follow (and would index the slot
  // map out of bounds): treat the reply as an ordinary error.
  if (out.slot < 0 || out.slot > 16383 || out.target.port <= 0 || out.target.port > 65535) {
    return std::nullopt;
  }
  return out;
}

// hiredis 0.14's own reply constructors, with limits: the same objects (freeReplyObject
// frees them), refused (NULL, which fails the reader) above kMaxReplyElements elements or
// kMaxReplyString bytes.
struct ReplyLimits {
  static void refuse(const redisReadTask* task) {
    if (task->privdata != nullptr)
      static_cast<Connection*>(task->privdata)->reply_too_large_ = true;
  }
  static redisReply* make(const redisReadTask* task, int type) {
    auto* r = static_cast<redisReply*>(std::calloc(1, sizeof(redisReply)));
    if (r == nullptr) return nullptr;
    r->type = type;
    if (task->parent != nullptr) {
      static_cast<redisReply*>(task->parent->obj)->element[task->idx] = r;
    }
    return r;
  }
  static void* create_string(const redisReadTask* task, char* str, size_t len) {
    if (len > kMaxReplyString) {
      refuse(task);
      return nullptr;
    }
    auto* buf = static_cast<char*>(std::malloc(len + 1));
    if (buf == nullptr) return nullptr;
    redisReply* r = make(task, task->type);
    if (r == nullptr) {
      std::free(buf);
      return nullptr;
    }
    std::memcpy(buf, str, len);
    buf[len] = '\0';
    r->str = buf;
    r->len = len;
    return r;
  }
  static void* create_array(const redisReadTask* task, int elements) {
    if (elements > kMaxReplyElements) {
      refuse(task);
      return nullptr;
    }
    redisReply** table = nullptr;
    if (elements > 0) {
      table = static_cast<redisReply**>(
          std::calloc(static_cast<size_t>(elements), sizeof(redisReply*)));
      if (table == nullptr) return nullptr;
    }
    redisReply* r = make(task, REDIS_REPLY_ARRAY);
    if (r == nullptr) {
      std::free(table);
      return nullptr;
    }
    r->element = table;
    r->elements = static_cast<size_t>(std::max(elements, 0));
    return r;
  }
  static void* create_integer(const redisReadTask* task, long long value) {
    redisReply* r = make(task, REDIS_REPLY_INTEGER);
    if (r != nullptr) r->integer = value;
    return r;
  }
  static void* create_nil(const redisReadTask* task) { return make(task, REDIS_REPLY_NIL); }
  static void free_object(void* reply) { freeReplyObject(reply); }

  static void install(redisContext* ctx, Connection* conn) {
    static redisReplyObjectFunctions functions{create_string, create_array, create_integer,
                                               create_nil, free_object};
    ctx->reader->fn = &functions;
    ctx->reader->privdata = conn;
  }
};

std::unique_ptr<Connection> Connection::open(const Endpoint& endpoint, const BackendConfig& config,
                                             std::string& error, ServerKind kind) {
  redisContext* ctx = redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port,
                                              to_timeval(config.connect_timeout));
  if (ctx == nullptr) {
    error = fmt::format("cannot connect to {}: out of memory", to_string(endpoint));
    return nullptr;
  }
  if (ctx->err != 0) {
    error = fmt::format("cannot connect to {}: {}", to_string(endpoint), ctx->errstr);
    redisFree(ctx);
    return nullptr;
  }
  // A program the application starts with fork+exec must not inherit lock connections
  // (hiredis 0.14 cannot open them with SOCK_CLOEXEC).
  ::fcntl(ctx->fd, F_SETFD, ::fcntl(ctx->fd, F_GETFD) | FD_CLOEXEC);
  redisSetTimeout(ctx, to_timeval(config.command_timeout));
  redisEnableKeepAlive(ctx);
  std::unique_ptr<Connection> conn(new Connection(ctx, endpoint));
  ReplyLimits::install(ctx, conn.get());
  if (!config.password.empty()) {
    Reply auth = config.username.empty()
                     ? conn->command({"AUTH", config.password})
                     : conn->command({"AUTH", config.username, config.password});
    if (!auth.ok() || auth.is_error()) {
      // The server's words only: they never echo the password.
      error = fmt::format("authentication to {} failed: {}", to_string(endpoint),
                          auth.ok() ? std::string(auth.text()) : auth.error());
      return nullptr;
    }
  }
  if (kind == ServerKind::kSentinel) return conn;
  if (config.database != 0) {
    const std::string db = std::to_string(config.database);
    Reply select = conn->command({"SELECT", db});
    if (!select.ok() || select.is_error()) {
      error = fmt::format("SELECT {} on {} failed: {}", db, to_string(endpoint),
                          select.ok() ? std::string(select.text()) : select.error());
      return nullptr;
    }
  }
  if (!conn->check_version(error) || !conn->measure_clock(error)) return nullptr;
  return conn;
}

// Before 7.0, an error raised inside a script (READONLY from a demoted master, say) comes
// back as "ERR Error running script", so a moved master cannot be told from the reply.
bool Connection::check_version(std::string& error) {
  Reply info = command({"INFO", "server"});
  if (!info.ok()) {
    error = fmt::format("INFO on {} failed: {}", to_string(endpoint_), info.error());
    return false;
  }
  // An ACL user without INFO cannot be told the version: nothing to hold against the server.
  if (info.is_error()) return true;
  constexpr std::string_view kField = "redis_version:";
  const std::string_view text = info.text();
  const std::size_t at = text.find(kField);
  if (at == std::string_view::npos) return true;  // not said: nothing to hold against it
  const std::size_t start = at + kField.size();
  const std::string_view version = text.substr(start, text.find_first_of("\r\n", start) - start);
  int major = 0;
  std::size_t digits = 0;
  for (;
       digits < version.size() && version[digits] >= '0' && version[digits] <= '9' && major < 1000;
       ++digits) {
    major = major * 10 + (version[digits] - '0');
  }
  if (digits == 0 || major >= kMinimumRedisMajor) return true;
  error = fmt::format("{} runs Redis {}: dlock needs Redis {}.0 or later", to_string(endpoint_),
                      version.substr(0, 32), kMinimumRedisMajor);
  return false;
}

Connection::~Connection() { redisFree(ctx_); }

bool Connection::measure_clock(std::string& error) {
  const auto before = Clock::now();
  Reply time = command({"TIME"});
  const auto after = Clock::now();
  const std::optional<std::int64_t> server_us = server_time_us_of(time);
  if (!server_us) {
    error = fmt::format("TIME on {} failed: {}", to_string(endpoint_),
                        !time.ok()        ? time.error()
                        : time.is_error() ? std::string(time.text())
                                          : "unexpected reply");
    return false;
  }
  server_offset_us_ = *server_us - (steady_us(before) + steady_us(after)) / 2;
  clock_measured_at_ = after;
  clock_trusted_ = true;
  return true;
}

std::optional<std::int64_t> server_time_us_of(const Reply& reply) {
  const redisReply* raw = reply.get();
  if (!reply.ok() || raw == nullptr || raw->type != REDIS_REPLY_ARRAY || raw->elements != 2)
    return std::nullopt;
  std::int64_t parts[2] = {0, 0};
  for (std::size_t i = 0; i < 2; ++i) {
    const redisReply* e = raw->element[i];
    if (e == nullptr || e->type != REDIS_REPLY_STRING || e->str == nullptr || e->len == 0 ||
        e->len > 18) {
      return std::nullopt;
    }
    for (std::size_t k = 0; k < e->len; ++k) {
      if (e->str[k] < '0' || e->str[k] > '9') return std::nullopt;
      parts[i] = parts[i] * 10 + (e->str[k] - '0');
    }
  }
  if (parts[1] >= 1000000 || parts[0] > INT64_MAX / 1000000 - 1) return std::nullopt;
  return parts[0] * 1000000 + parts[1];
}

std::int64_t Connection::server_time_us(Clock::time_point at) {
  if (!clock_trusted_ || Clock::now() - clock_measured_at_ >= kClockRemeasure) {
    std::string ignored;  // a failed TIME breaks the connection; the caller's command says so
    (void)measure_clock(ignored);
  }
  return steady_us(at) + server_offset_us_;
}

Reply Connection::fail_from_context() {
  broken_ = true;
  const bool timeout = ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
  if (timeout) {
    return Reply::failed(
        Reply::Status::kTimeout,
        fmt::format("no reply from {} within the command timeout", to_string(endpoint_)));
  }
  if (reply_too_large_) {
    return Reply::failed(
        Reply::Status::kBroken,
        fmt::format("connection to {} failed: a reply exceeded the limit of {} elements or {} "
                    "bytes per string",
                    to_string(endpoint_), kMaxReplyElements, kMaxReplyString));
  }
  return Reply::failed(Reply::Status::kBroken,
                       fmt::format("connection to {} failed: {}", to_string(endpoint_),
                                   ctx_->errstr[0] != '\0' ? ctx_->errstr : "closed"));
}

Reply Connection::command(const std::vector<std::string_view>& argv) {
  append(argv);
  return read_reply();
}

void Connection::append(const std::vector<std::string_view>& argv) {
  thread_local std::vector<const char*> ptrs;
  thread_local std::vector<size_t> lens;
  to_argv(argv, ptrs, lens);
  if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), ptrs.data(), lens.data()) !=
      REDIS_OK) {
    broken_ = true;
  }
}

int Connection::fd() const noexcept { return ctx_->fd; }

int Connection::send_buffered() noexcept {
  // The buffer is hiredis's output buffer (an sds string); sdslen and sdssetlen are inline
  // in its header. It is emptied only once all of it is sent: after an error the connection
  // is broken and never written again.
  const std::size_t length = sdslen(ctx_->obuf);
  std::size_t done = 0;
  while (done < length) {
    const ssize_t sent = ::send(ctx_->fd, ctx_->obuf + done, length - done, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return errno;  // EAGAIN/EWOULDBLOCK: the send timeout (SO_SNDTIMEO) passed
    }
    done += static_cast<std::size_t>(sent);
  }
  sdssetlen(ctx_->obuf, 0);
  ctx_->obuf[0] = '\0';
  return 0;
}

bool Connection::flush() {
  if (broken_) return false;
  if (send_buffered() != 0) {
    broken_ = true;
    return false;
  }
  return true;
}

bool Connection::read_available() {
  if (broken_) return false;
  if (redisBufferRead(ctx_) != REDIS_OK) {
    broken_ = true;
    return false;
  }
  return true;
}

std::optional<Reply> Connection::next_reply() {
  if (broken_) return std::nullopt;
  void* raw = nullptr;
  if (redisGetReplyFromReader(ctx_, &raw) != REDIS_OK) {
    broken_ = true;
    return std::nullopt;
  }
  if (raw == nullptr) return std::nullopt;
  return Reply::ok(static_cast<redisReply*>(raw));
}

Reply Connection::read_reply() {
  if (broken_ && ctx_->err == 0) {
    return Reply::failed(Reply::Status::kBroken, "connection dropped after an earlier failure");
  }
  // Written here rather than by redisGetReply: hiredis would write() and risk a SIGPIPE.
  if (const int error = send_buffered(); error != 0) {
    broken_ = true;
    if (error == EAGAIN || error == EWOULDBLOCK) {
      return Reply::failed(
          Reply::Status::kTimeout,
          fmt::format("could not send to {} within the command timeout", to_string(endpoint_)));
    }
    return Reply::failed(
        Reply::Status::kBroken,
        fmt::format("connection to {} failed: {}", to_string(endpoint_), std::strerror(error)));
  }
  errno = 0;
  void* raw = nullptr;
  if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) return fail_from_context();
  return Reply::ok(static_cast<redisReply*>(raw));
}

}  // namespace dlock::internal
