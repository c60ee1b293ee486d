#include "redis/connection.hpp"

#include <dlock/common/text.hpp>

#include <fmt/format.h>

#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "redis/connection_shared.hpp"
#include "redis/resp.hpp"
#include "redis/stream.hpp"
#include "redis/tls.hpp"

namespace dlock::internal {
namespace {

std::int64_t steady_us(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// How much one read takes from the socket; a reply larger than this is read in several.
constexpr std::size_t kReadChunk = 16 * 1024;
// How many reads one read_available() makes at most (1 MiB).
constexpr int kReadsPerCall = 64;

std::uint64_t next_serial() noexcept {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

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

std::unique_ptr<Connection> Connection::open(const Endpoint& endpoint, const BackendConfig& config,
                                             std::string& error, ServerKind kind) {
  std::shared_ptr<const TlsContext> tls;
  std::string why;
  if (config.tls.enabled && !(tls = TlsContext::get(config.tls, why))) {
    error = fmt::format("cannot connect to {}: TLS: {}", to_string(endpoint), why);
    return nullptr;
  }
  auto stream = Stream::open(endpoint, std::move(tls), Clock::now() + config.connect_timeout, why);
  if (!stream) {
    error = fmt::format("cannot connect to {}: {}", to_string(endpoint), why);
    return nullptr;
  }
  std::unique_ptr<Connection> conn(
      new Connection(std::move(stream), endpoint, config.command_timeout));
  if (conn->reader_ == nullptr) {
    error = fmt::format("cannot connect to {}: out of memory", to_string(endpoint));
    return nullptr;
  }
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
  if (kind == ServerKind::kSentinel) {
    // A TLS 1.3 server refuses a missing client certificate only after the handshake, at
    // the first read: one round trip here makes that a failed open, not a broken command.
    if (config.tls.enabled && config.password.empty()) {
      Reply ping = conn->command({"PING"});
      if (!ping.ok()) {
        error = fmt::format("PING on {} failed: {}", to_string(endpoint), ping.error());
        return nullptr;
      }
    }
    return conn;
  }
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

Connection::Connection(std::unique_ptr<Stream> stream, Endpoint endpoint, Millis command_timeout)
    : stream_(std::move(stream)),
      endpoint_(std::move(endpoint)),
      command_timeout_(command_timeout),
      reader_(new_reply_reader(&reply_too_large_)),
      serial_(next_serial()) {}

// Detached replies read already go to their owners; the others never come.
Connection::~Connection() {
  if (shared_) close_shared();
  if (!out_of_step_) {
    while (!owed_.empty()) {
      auto reply = parse_reply();
      if (!reply) break;
      hand_over(std::move(*reply));
    }
  }
  while (!owed_.empty()) {
    hand_over(out_of_step_ ? Reply::failed(Reply::Status::kTimeout, error_)
              : broken_    ? failed_reply()
                           : Reply::failed(Reply::Status::kBroken,
                                           fmt::format("connection to {} closed before the reply "
                                                          "came",
                                                       to_string(endpoint_))));
  }
  if (reader_ != nullptr) redisReaderFree(reader_);
}

void Connection::hand_over(Reply reply) {
  Owed owed = std::move(owed_.front());
  owed_.pop_front();
  owed.on_reply(std::move(reply));
}

void Connection::detach_last(std::function<void(Reply)> on_reply) {
  if (shared_) {
    detach_shared(std::move(on_reply));
    return;
  }
  if (broken_) {
    on_reply(failed_reply());
    return;
  }
  owed_.push_back(Owed{std::move(on_reply), Clock::now()});
}

bool Connection::sent_script(std::string_view sha) const noexcept {
  std::lock_guard lock(state_mutex_);
  return std::find(scripts_.begin(), scripts_.end(), sha) != scripts_.end();
}

void Connection::note_script(std::string_view sha) {
  std::lock_guard lock(state_mutex_);
  if (std::find(scripts_.begin(), scripts_.end(), sha) == scripts_.end()) {
    scripts_.emplace_back(sha);
  }
}

Clock::time_point Connection::owed_since() const noexcept {
  if (shared_) {
    std::lock_guard lock(shared_->mutex);
    for (const auto& slot : shared_->due) {
      if (slot->on_reply) return slot->since;
    }
    return Clock::time_point::max();
  }
  return owed_.empty() ? Clock::time_point::max() : owed_.front().since;
}

std::string Connection::error() const {
  if (!shared_) return error_;
  std::lock_guard lock(shared_->mutex);
  return error_;
}

bool Connection::settle(Clock::time_point deadline) {
  if (shared_) return settle_shared(deadline);
  flush();
  for (;;) {
    if (next_reply()) return fail("a reply came that no command was waiting for");
    if (owed_.empty()) return !broken_;
    if (broken_) return false;
    const bool buffered = has_buffered() && Clock::now() < deadline;
    if (!buffered && !wait_for(fd(), poll_events(), deadline)) {
      abandon();
      return false;
    }
    read_available();
  }
}

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
  std::lock_guard lock(state_mutex_);
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
  std::unique_lock lock(state_mutex_);
  if (!clock_trusted_ || Clock::now() - clock_measured_at_ >= kClockRemeasure) {
    lock.unlock();
    std::string ignored;  // a failed TIME breaks the connection; the caller's command says so
    (void)measure_clock(ignored);
    lock.lock();
  }
  return steady_us(at) + server_offset_us_;
}

void Connection::distrust_clock() noexcept {
  std::lock_guard lock(state_mutex_);
  clock_trusted_ = false;
}

bool Connection::fail(std::string why) {
  if (!broken_ || error_.empty()) error_ = std::move(why);
  broken_ = true;
  return false;
}

Reply Connection::failed_reply() const {
  if (error_.empty()) {
    return Reply::failed(Reply::Status::kBroken, "connection dropped after an earlier failure");
  }
  return Reply::failed(Reply::Status::kBroken,
                       fmt::format("connection to {} failed: {}", to_string(endpoint_), error_));
}

Reply Connection::command(const std::vector<std::string_view>& argv) {
  append(argv);
  return read_reply();
}

void Connection::append(const std::vector<std::string_view>& argv) {
  if (shared_) {
    stage(argv);
  } else if (!broken_) {
    append_command(out_, argv);
  }
}

int Connection::fd() const noexcept { return stream_->fd(); }

short Connection::poll_events() const noexcept {
  const bool unsent = sent_ < out_.size() && !write_wants_read_;
  return static_cast<short>(POLLIN | (unsent || read_wants_write_ ? POLLOUT : 0));
}

bool Connection::has_buffered() const noexcept {
  return !broken_ && !starved_ && stream_->has_buffered();
}

void Connection::abandon() noexcept {
  broken_ = true;
  out_of_step_ = true;
  if (error_.empty()) error_ = "replies still owed when the deadline passed";
}

bool Connection::flush() {
  if (broken_) return false;
  while (sent_ < out_.size()) {
    const IoResult sent = stream_->write_some(out_.data() + sent_, out_.size() - sent_);
    write_wants_read_ = sent.what == Io::kWantRead;
    if (sent.what == Io::kDone) {
      sent_ += sent.bytes;
      written_ += sent.bytes;
    } else if (sent.what == Io::kWantRead || sent.what == Io::kWantWrite) {
      send_blocked_ = true;
      return true;  // the rest goes once the socket allows (poll_events says which way)
    } else {
      return fail(sent.error);
    }
  }
  out_.clear();
  sent_ = 0;
  send_blocked_ = false;
  return true;
}

bool Connection::flush(Clock::time_point deadline) {
  if (shared_) return flush_shared(deadline);
  while (flush() && sent_ < out_.size()) {
    if (!wait_for(fd(), write_wants_read_ ? POLLIN : POLLOUT, deadline)) {
      return fail(fmt::format("could not send to {} in time", to_string(endpoint_)));
    }
  }
  return !broken_;
}

bool Connection::read_available() {
  if (!flush()) return false;
  read_wants_write_ = false;
  char chunk[kReadChunk];
  // Bounded, so that a server that never stops sending cannot hold the caller here: what is
  // left shows as readable or as has_buffered(), and the caller's deadline still counts.
  for (int reads = 0; reads < kReadsPerCall; ++reads) {
    const IoResult got = stream_->read_some(chunk, sizeof chunk);
    starved_ = got.what != Io::kDone;
    if (got.what == Io::kWantRead) return true;
    if (got.what == Io::kWantWrite) {
      read_wants_write_ = true;
      return true;
    }
    if (got.what != Io::kDone) return fail(got.error);
    if (redisReaderFeed(reader_, chunk, got.bytes) != REDIS_OK) return fail("unreadable reply");
    // A short read took all the socket had. TLS returns a record at a time, and may hold
    // more of them (read ahead): those are read until it wants the socket again.
    if (got.bytes < sizeof chunk && !stream_->has_buffered()) return true;
  }
  return true;
}

std::optional<Reply> Connection::take_reply() {
  for (;;) {
    auto reply = parse_reply();
    if (!reply || owed_.empty()) return reply;
    hand_over(std::move(*reply));
  }
}

std::optional<Reply> Connection::parse_reply() {
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
    fail(reply_too_large_ ? fmt::format("a reply exceeded the limit of {} elements or {} bytes "
                                        "per string",
                                        kMaxReplyElements, kMaxReplyString)
                          : std::string("unreadable reply"));
    return std::nullopt;
  }
  if (raw == nullptr) return std::nullopt;
  return Reply::ok(static_cast<redisReply*>(raw));
}

std::optional<Reply> Connection::next_reply() {
  if (out_of_step_) return std::nullopt;
  return take_reply();
}

Reply Connection::read_reply() { return read_reply(Clock::now() + command_timeout_); }

Reply Connection::read_reply(Clock::time_point deadline) {
  if (shared_) return read_shared(deadline);
  flush();  // a failure shows below, after the replies parsed before it
  for (;;) {
    // Replies read before the connection failed (a pipeline answered, then closed) first.
    if (auto reply = next_reply()) return std::move(*reply);
    if (broken_) return failed_reply();
    const bool buffered = has_buffered() && Clock::now() < deadline;
    if (!buffered && !wait_for(fd(), poll_events(), deadline)) {
      const bool unsent = sent_ < out_.size();
      abandon();
      return Reply::failed(
          Reply::Status::kTimeout,
          unsent
              ? fmt::format("could not send to {} within the command timeout", to_string(endpoint_))
              : fmt::format("no reply from {} within the command timeout", to_string(endpoint_)));
    }
    read_available();
  }
}

}  // namespace dlock::internal
