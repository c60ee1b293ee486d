// One connection to a Redis server (plain TCP or TLS, redis/stream.hpp) with connect and
// command timeouts: commands go out in RESP (redis/resp.hpp), replies come back as Reply and
// are read through redis/reply.hpp. The only code that turns I/O errors into dlock's terms.
// Hiredis types stay inside runtime/src/redis.
#pragma once

#include <chrono>
#include <cstdint>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backend.hpp"

struct redisReader;
struct redisReply;

namespace dlock::internal {

/// Error replies that tell a client to go elsewhere or to try again.
enum class ServerError {
  kNone,         ///< not an error reply
  kMoved,        ///< MOVED slot host:port: the slot lives elsewhere now (cluster)
  kAsk,          ///< ASK slot host:port: this one command goes elsewhere, after ASKING
  kTryAgain,     ///< TRYAGAIN: the slot is being migrated; retry shortly
  kClusterDown,  ///< CLUSTERDOWN: the cluster cannot serve the slot right now
  kReadOnly,     ///< READONLY: a replica (a former master, after a failover)
  kNotReady,     ///< LOADING, MASTERDOWN, UNBLOCKED: a server changing role or starting up
  kNoScript,     ///< NOSCRIPT: the script cache is empty
  kOther,
};

/// Where a MOVED or ASK error points.
struct Redirect {
  int slot = 0;
  Endpoint target;
};

/// A reply, or why there is none.
class Reply {
 public:
  enum class Status {
    kOk,       ///< a reply (which may be a Redis error reply: see is_error())
    kTimeout,  ///< no answer in time: the command may still be applied
    kBroken,   ///< the connection failed: the command may or may not have been applied
    kNotSent,  ///< no connection could be had: the command was not sent
  };

  Reply() = default;
  static Reply ok(redisReply* raw);
  static Reply failed(Status status, std::string error);

  [[nodiscard]] Status status() const noexcept { return status_; }
  [[nodiscard]] bool ok() const noexcept { return status_ == Status::kOk; }
  /// An earlier attempt of the same call was sent and may have been applied (it broke or
  /// timed out, or followed such an attempt itself), so this reply may not tell the whole
  /// story: a key found gone may be one that attempt released, a busy answer may hide a
  /// grant that attempt made.
  [[nodiscard]] bool after_uncertain_attempt() const noexcept { return after_uncertain_; }
  /// Sets after_uncertain_attempt() when `earlier` was uncertain itself or followed one.
  void follow(const Reply& earlier) noexcept {
    after_uncertain_ = after_uncertain_ || earlier.after_uncertain_ ||
                       earlier.status_ == Status::kBroken || earlier.status_ == Status::kTimeout;
  }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  [[nodiscard]] const redisReply* get() const noexcept { return raw_.get(); }

  [[nodiscard]] bool is_error() const noexcept;
  [[nodiscard]] bool is_integer() const noexcept;
  [[nodiscard]] long long integer() const noexcept;
  [[nodiscard]] std::string_view text() const noexcept;  ///< status, error or string reply
  /// Element i of an array reply (nullptr when out of range or not an array).
  [[nodiscard]] const redisReply* element(std::size_t i) const noexcept;

  /// What an error reply means to a client that routes commands (kNone when not an error).
  [[nodiscard]] ServerError server_error() const noexcept;
  /// The target of a MOVED or ASK error. A redirect naming no host (`MOVED 1 :7001`) means
  /// the host of `from`, the server that sent it.
  [[nodiscard]] std::optional<Redirect> redirect(const Endpoint& from) const;

 private:
  struct Free {
    void operator()(redisReply* r) const noexcept;
  };
  Status status_ = Status::kBroken;
  bool after_uncertain_ = false;
  std::string error_;
  std::unique_ptr<redisReply, Free> raw_;
};

/// The time in a reply to TIME, in microseconds since the Unix epoch; nothing when the
/// reply is not two decimal strings.
[[nodiscard]] std::optional<std::int64_t> server_time_us_of(const Reply& reply);

/// How long a server-clock estimate is used before it is measured again: server clocks can
/// step (ntp, a restored VM) and a client's steady clock can stop in a suspend.
inline constexpr std::chrono::minutes kClockRemeasure{1};

/// The oldest Redis a data server may run: from 7.0 on, an error raised inside a script keeps
/// its code (READONLY, MASTERDOWN), which is how a demoted master is noticed.
inline constexpr int kMinimumRedisMajor = 7;

/// Limits on one reply, so that a faulty or hostile server cannot make the reader allocate
/// at will (hiredis 0.14 allocates an array's element table as soon as `*N` arrives and has
/// no limits of its own). dlock's replies are a few elements and short strings; admin scans
/// come in pages.
inline constexpr long long kMaxReplyElements = 1 << 20;
inline constexpr std::size_t kMaxReplyString = std::size_t{64} << 20;

/// A data server has a dataset and a clock; a sentinel has neither (no SELECT, no TIME).
enum class ServerKind { kData, kSentinel };

class Stream;

class Connection {
 public:
  /// Connects, authenticates and selects the database. Returns nullptr and sets `error`
  /// (never containing the password) on failure.
  static std::unique_ptr<Connection> open(const Endpoint& endpoint, const BackendConfig& config,
                                          std::string& error, ServerKind kind = ServerKind::kData);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Lets several threads use the connection at once (a shared pool, pool.hpp): from then on
  /// command(), append(), read_reply(), flush(deadline), detach_last(), settle() and
  /// server_time_us() may be called from any number of threads. A thread's appends go out
  /// together, in order, at its next read_reply() or flush(deadline), and it reads the
  /// replies to its own commands; whichever thread waits reads for all of them. While that
  /// thread waits for a reply to a command sent whole, batches queued by others are left to
  /// it, and go out in one send when a reply wakes it (or it leaves). A thread
  /// whose deadline passes gives up on its own replies only (they are read and dropped), and
  /// the connection is then retiring(); a connection that breaks fails the commands sent on
  /// it. The non-blocking calls (fd() to next_reply(), abandon()) are for connections that
  /// are not shared.
  void share(std::chrono::microseconds spin);
  /// Shared: a command sent on it got no reply in time, so the server may be gone. Commands
  /// already sent keep their own deadlines; new ones are better sent elsewhere.
  [[nodiscard]] bool retiring() const noexcept;
  /// Shared: how long a caller waiting for a reply that another thread reads spins before
  /// it sleeps (BackendConfig::spin); 0 when not shared.
  [[nodiscard]] std::chrono::microseconds spin() const noexcept;
  /// Shared: takes no new callers from now on (the pool was cleared).
  void retire() noexcept;
  /// Shared: drops what the calling thread appended and did not send, and gives up on the
  /// replies it did not read.
  void forget_thread() noexcept;

  /// Sends one command and waits for its reply (binary-safe arguments), for up to the
  /// command timeout.
  Reply command(const std::vector<std::string_view>& argv);
  /// Pipelining: queue commands, then read their replies in order. Each read_reply() waits
  /// up to the command timeout (sending what is queued counts against it).
  void append(const std::vector<std::string_view>& argv);
  Reply read_reply();
  Reply read_reply(Clock::time_point deadline);

  /// Non-blocking use, for talking to several servers at once from one thread: append,
  /// flush, then poll fd() for poll_events(), call read_available() and take next_reply()
  /// until it is empty; a connection with has_buffered() is read without waiting. flush()
  /// sends what the socket takes now (read_available() sends the rest); both return false
  /// (and break the connection) on error.
  bool flush();
  /// Sends everything queued, waiting for the socket up to `deadline`. Shared: while another
  /// thread reads, leaves the sending to it (see share()) and returns at once.
  bool flush(Clock::time_point deadline);
  [[nodiscard]] int fd() const noexcept;
  [[nodiscard]] short poll_events() const noexcept;
  [[nodiscard]] bool has_buffered() const noexcept;
  bool read_available();
  /// A reply read and parsed already, if any; after an I/O failure, the ones that came
  /// before it (a server that answered, then closed), never after abandon() or a timeout.
  std::optional<Reply> next_reply();
  /// Gives up on replies still owed (a deadline passed): the connection is out of step.
  void abandon() noexcept;

  /// Detached commands: the reply to the command appended last goes to `on_reply` instead of
  /// to whoever reads next. Such replies come ahead of any command appended later, so every
  /// read takes them first and hands them over; a connection destroyed while some are owed
  /// hands over the ones it has read, then failures (kTimeout once out of step, else
  /// kBroken). `on_reply` runs on the reading thread and must not throw.
  void detach_last(std::function<void(Reply)> on_reply);
  /// Shared: how many commands are owed a reply, sent or queued to be (for tests).
  [[nodiscard]] std::size_t due() const;
  /// How many detached replies are owed, and since when the oldest is.
  [[nodiscard]] std::size_t owed() const noexcept;
  [[nodiscard]] Clock::time_point owed_since() const noexcept;
  /// Reads until no detached reply is owed; false when the connection broke or `deadline`
  /// passed first (it is then out of step).
  bool settle(Clock::time_point deadline);
  /// Whether this connection sent `sha`'s script with EVAL before (note_script), which put
  /// it in the server's script cache until a SCRIPT FLUSH or a restart.
  [[nodiscard]] bool sent_script(std::string_view sha) const noexcept;
  void note_script(std::string_view sha);
  /// A number no other connection of this process has, for telling connections apart.
  [[nodiscard]] std::uint64_t serial() const noexcept { return serial_; }
  /// Why the connection broke ("closed by the server", "TLS read failed: ..."), or empty.
  [[nodiscard]] std::string error() const;

  /// After a timeout or an I/O error the connection is out of step and must be dropped.
  [[nodiscard]] bool broken() const noexcept { return broken_; }
  /// Server clock (microseconds since the epoch) at the given steady time, estimated from
  /// TIME and the round trip: at connect time, again once the estimate is older than
  /// kClockRemeasure, and again after distrust_clock(). Measuring again costs one TIME; if it
  /// fails, the last estimate stands.
  [[nodiscard]] std::int64_t server_time_us(Clock::time_point at);
  /// The server's answer suggests the estimate is off (an acquire "arrived too late"): the
  /// next server_time_us() measures again.
  void distrust_clock() noexcept;
  [[nodiscard]] const Endpoint& endpoint() const noexcept { return endpoint_; }

 private:
  Connection(std::unique_ptr<Stream> stream, Endpoint endpoint, Millis command_timeout);
  bool fail(std::string why);
  Reply failed_reply() const;
  /// A parsed reply for the caller, if one is complete, after handing over the detached
  /// replies before it.
  std::optional<Reply> take_reply();
  /// A parsed reply, if one is complete; breaks the connection when the reader failed.
  std::optional<Reply> parse_reply();
  /// Gives the reply to the oldest detached command.
  void hand_over(Reply reply);
  bool measure_clock(std::string& error);

  // A shared connection (share()); redis/connection_shared.cpp.
  struct Shared;
  struct Handed;
  Reply read_shared(Clock::time_point deadline);
  bool flush_shared(Clock::time_point deadline);
  void stage(const std::vector<std::string_view>& argv);
  /// With Shared::mutex held: sends what the calling thread appended.
  void publish(Handed& handed);
  /// With Shared::mutex held: gives the replies read so far to their commands.
  void dispatch(Handed& handed);
  /// With Shared::mutex held: the connection broke; every command sent fails.
  void fail_due(Handed& handed);
  /// Reads for every thread until `until` holds, the connection breaks or `deadline` passes;
  /// the mutex is let go while waiting for the socket.
  void lead(std::unique_lock<std::mutex>& lock, Clock::time_point deadline,
            const std::function<bool()>& until);
  /// lead()'s loop: reads, and sends what publish() left to it, until `until` holds (or
  /// `deadline` passes) and what it was left to send is out or another thread waits to
  /// take the reading over.
  void read_for_all(std::unique_lock<std::mutex>& lock, Clock::time_point deadline,
                    const std::function<bool()>& until, Handed& handed);
  /// With Shared::mutex held: a thread sleeps waiting for a reply (pass_reading() wakes it).
  [[nodiscard]] bool waiting_reader() const noexcept;
  void detach_shared(std::function<void(Reply)> on_reply);
  /// With Shared::mutex held: the oldest command owed a reply went out whole, so a reply
  /// is coming (or the connection breaks, or the reader's deadline passes).
  [[nodiscard]] bool reply_coming() const noexcept;
  /// With Shared::mutex held: wakes the first thread waiting for a reply, to read for all.
  void pass_reading();
  /// With Shared::mutex held: the calling thread's replies not read yet fail as timed out
  /// (its call is over), and the connection retires.
  void give_up(std::thread::id me);
  bool settle_shared(Clock::time_point deadline);
  void close_shared() noexcept;
  /// Refuses a data server older than kMinimumRedisMajor (from INFO server).
  bool check_version(std::string& error);

  std::unique_ptr<Stream> stream_;
  Endpoint endpoint_;
  Millis command_timeout_;
  redisReader* reader_;
  std::string out_;  // commands queued; the first `sent_` bytes are on their way
  std::size_t sent_ = 0;
  bool read_wants_write_ = false;  // TLS: a read must wait until the socket is writable
  bool write_wants_read_ = false;  // TLS: a write must wait until the socket is readable
  bool send_blocked_ = false;      // the last flush() left bytes the socket would not take
  std::uint64_t written_ = 0;      // bytes handed to the socket since the connection opened
  // The last read found no complete TLS record: what OpenSSL holds is part of one, and
  // only bytes from the socket help, so has_buffered() does not count it.
  bool starved_ = true;
  std::atomic<bool> broken_{false};
  bool out_of_step_ = false;  // replies owed were given up (abandon, a timeout)
  std::string error_;
  // Set by the reply reader (resp.cpp) when a reply exceeded kMaxReplyElements or
  // kMaxReplyString: the reader then fails, and the connection says why.
  bool reply_too_large_ = false;
  struct Owed {
    std::function<void(Reply)> on_reply;
    Clock::time_point since;
  };
  std::deque<Owed> owed_;             // detached replies, in the order they are due
  std::unique_ptr<Shared> shared_;    // share()
  mutable std::mutex state_mutex_;    // scripts_ and the clock estimate
  std::vector<std::string> scripts_;  // note_script()
  const std::uint64_t serial_;
  std::int64_t server_offset_us_ = 0;  // server time minus steady time
  Clock::time_point clock_measured_at_{};
  bool clock_trusted_ = false;
};

/// `host:port`, with IPv6 hosts in brackets.
[[nodiscard]] std::string to_string(const Endpoint& endpoint);

}  // namespace dlock::internal
