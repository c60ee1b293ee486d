// What the benchmark programs share: the server they measure against, a raw hiredis
// connection for the reference round trips, percentiles, and the RESULT lines that
// scripts/bench reads.
//
// The server: with DLOCK_BENCH_PORT set (scripts/bench does), every program measures against
// the redis-server already listening on 127.0.0.1:<port>, so that dlock, the references and
// the peer libraries share one server in one run. Without it, a program starts its own
// server through the test support library (what the ctest smoke runs do).
#pragma once

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <sys/resource.h>
#include <sys/time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/config.hpp"
#include "redis_process.hpp"

namespace dlock::bench {

struct ServerAddress {
  std::string host;
  int port = 0;
};

/// The server of this run (see above); started once, on first use.
inline const ServerAddress& bench_server() {
  static const ServerAddress address = [] {
    if (const char* env = std::getenv("DLOCK_BENCH_PORT"); env != nullptr && *env != '\0') {
      char* end = nullptr;
      const long port = std::strtol(env, &end, 10);
      if (*end != '\0' || port <= 0 || port > 65535) {
        throw std::invalid_argument(fmt::format("DLOCK_BENCH_PORT: '{}' is not a port number", env));
      }
      return ServerAddress{"127.0.0.1", static_cast<int>(port)};
    }
    static dlock::test::RedisServer started;
    started.start();
    return ServerAddress{started.host(), started.port()};
  }();
  return address;
}

/// A configuration with one single-node backend on the bench server.
/// `pool_size` 0 is the library's default.
inline dlock::Config single_node_config(const std::string& service, int pool_size = 0) {
  dlock::Config config;
  config.service = service;
  dlock::BackendConfig backend;
  backend.name = "default";
  backend.endpoints = {dlock::Endpoint{bench_server().host, bench_server().port}};
  backend.pool_size = pool_size;
  config.backends["default"] = backend;
  return config;
}

/// One hiredis connection to the bench server, with a 2 s timeout on every call.
class RawConnection {
 public:
  RawConnection() {
    const timeval timeout{2, 0};
    ctx_ = redisConnectWithTimeout(bench_server().host.c_str(), bench_server().port, timeout);
    if (ctx_ == nullptr || ctx_->err != 0) {
      throw std::runtime_error(fmt::format("connecting to {}:{}: {}", bench_server().host,
                                           bench_server().port, ctx_ ? ctx_->errstr : "out of memory"));
    }
    redisSetTimeout(ctx_, timeout);
  }
  ~RawConnection() { redisFree(ctx_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  /// Sends one command (redisCommand format) and returns its reply, which the caller frees
  /// with freeReplyObject; throws on a connection error.
  template <typename... Args>
  redisReply* command(const char* format, Args... args) {
    auto* reply = static_cast<redisReply*>(redisCommand(ctx_, format, args...));
    if (reply == nullptr) throw std::runtime_error(fmt::format("redis: {}", ctx_->errstr));
    return reply;
  }
  /// Sends one command given as arguments (redisCommandArgv) and returns its reply, as
  /// command() does.
  redisReply* command_argv(std::vector<const char*> argv, const std::vector<std::size_t>& lengths) {
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    if (reply == nullptr) throw std::runtime_error(fmt::format("redis: {}", ctx_->errstr));
    return reply;
  }
  /// The next reply without sending anything (a pub/sub message); throws on error or timeout.
  redisReply* next_reply() {
    void* reply = nullptr;
    if (redisGetReply(ctx_, &reply) != REDIS_OK || reply == nullptr) {
      throw std::runtime_error(fmt::format("redis: {}", ctx_->errstr));
    }
    return static_cast<redisReply*>(reply);
  }
  /// Sends one command (redisCommand format) at once without reading its reply, which comes
  /// from next_reply() later; throws on a connection error.
  template <typename... Args>
  void send(const char* format, Args... args) {
    int done = 0;
    if (redisAppendCommand(ctx_, format, args...) != REDIS_OK) {
      throw std::runtime_error(fmt::format("redis: {}", ctx_->errstr));
    }
    while (done == 0) {
      if (redisBufferWrite(ctx_, &done) != REDIS_OK) {
        throw std::runtime_error(fmt::format("redis: {}", ctx_->errstr));
      }
    }
  }
  /// Runs a command whose reply is not needed.
  template <typename... Args>
  void run(const char* format, Args... args) {
    freeReplyObject(command(format, args...));
  }
  /// SCRIPT LOAD, returning the script's SHA1.
  std::string load_script(const char* body) {
    redisReply* reply = command("SCRIPT LOAD %s", body);
    std::string sha = reply->type == REDIS_REPLY_STRING ? std::string(reply->str, reply->len) : "";
    freeReplyObject(reply);
    if (sha.empty()) throw std::runtime_error("SCRIPT LOAD: no SHA1 in the reply");
    return sha;
  }

 private:
  redisContext* ctx_ = nullptr;
};

/// The text of one of dlock's scripts (runtime/lua/NAME), for raw references that send
/// dlock's own scripts without the client library.
inline std::string lua_file(const std::string& name) {
  const std::string here = __FILE__;
  const std::string path = here.substr(0, here.rfind('/') + 1) + "../runtime/lua/" + name;
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) throw std::runtime_error("cannot read " + path);
  return text.str();
}

/// A lock script as the runtime sends it (scripts.cpp): holders.lua put before it, and before
/// a release also release_lock.lua. Its five keys are the lock, the fencing counter, the
/// holders, the fair queue and its places.
inline std::string lua_source(const std::string& name) {
  const bool releases = name == "release.lua" || name == "release_together.lua";
  return lua_file("holders.lua") + (releases ? lua_file("release_lock.lua") : "") + lua_file(name);
}

/// The minimal owner-checked release of the floor: delete the key if it still holds our value.
inline constexpr const char* kFloorRelease =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/// Median round trip of `count` PINGs on a fresh connection, in microseconds.
inline double ping_median_us(int count) {
  RawConnection raw;
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const auto start = std::chrono::steady_clock::now();
    raw.run("PING");
    samples.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

/// CPU seconds (user + system) used by this process (RUSAGE_SELF) or by its children that
/// have ended (RUSAGE_CHILDREN).
inline double cpu_seconds(int who = RUSAGE_SELF) {
  rusage usage{};
  ::getrusage(who, &usage);
  return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

/// The q-quantile (0..1) of sorted samples, nearest rank.
inline double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const auto rank = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(rank, sorted.size() - 1)];
}

/// Refuses arguments that are not `--name value` pairs with a name in `known`.
inline void check_options(int argc, char** argv, std::initializer_list<std::string_view> known) {
  for (int i = 1; i < argc; i += 2) {
    const std::string_view name = argv[i];
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw std::invalid_argument(fmt::format("unknown option '{}'", name));
    }
    if (i + 1 >= argc) throw std::invalid_argument(fmt::format("{}: missing value", name));
  }
}

/// Reads `--name value` pairs: the value of `name`, else `fallback`. A value that is not a
/// positive integer is an error naming the option.
inline long option(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) != name) continue;
    char* end = nullptr;
    const long value = std::strtol(argv[i + 1], &end, 10);
    if (*end != '\0' || value <= 0) {
      throw std::invalid_argument(fmt::format("{}: '{}' is not a positive integer", name, argv[i + 1]));
    }
    return value;
  }
  return fallback;
}

}  // namespace dlock::bench
