// dlock's own lock scripts sent over a raw hiredis connection, the way the client library
// sends them but without it: the floors that the library's figures are set against.
#pragma once

#include <hiredis/hiredis.h>

#include <string>
#include <utility>
#include <vector>

#include "bench_support.hpp"

namespace dlock::bench {

// dlock's acquire and release calls for one lock, with the keys, owner id and metadata dlock
// would send (see lock_scripts.cpp), the scripts loaded on `raw`. Two owners take turns, as
// every dlock acquisition has an owner of its own: a release that was not applied makes the
// next acquire find the lock busy, and the benchmark stops instead of measuring a reentry.
class DlockCalls {
 public:
  explicit DlockCalls(RawConnection& raw, const std::string& name = "raw-key") {
    const std::string acquire_sha = raw.load_script(lua_source("acquire.lua").c_str());
    const std::string release_sha = raw.load_script(lua_source("release.lua").c_str());
    const std::string prefix = key_prefix(name);
    for (const char* owner : {"5f3a9c1e2b7d4a605f3a9c1e2b7d4a60:1a", "5f3a9c1e2b7d4a605f3a9c1e2b7d4a60:1b"}) {
      const std::string keys = " 5 " + prefix + "lock " + prefix + "fence " + prefix + "holders " +
                               prefix + "queue " + prefix + "places " + owner;
      acquire_.push_back("EVALSHA " + acquire_sha + keys + " 30000 0 bench-host 12345 12345 " +
                         name + " 604800000 0 0 0");
      release_.push_back("EVALSHA " + release_sha + keys + " 0 " + prefix + "released 0 604800000");
    }
  }
  /// Deletes the keys of lock `name`.
  static void clear(RawConnection& raw, const std::string& name) {
    const std::string p = key_prefix(name);
    raw.run("DEL %s %s %s %s %s", (p + "lock").c_str(), (p + "fence").c_str(),
            (p + "holders").c_str(), (p + "queue").c_str(), (p + "places").c_str());
  }
  [[nodiscard]] const char* acquire() const { return acquire_[turn_].c_str(); }
  [[nodiscard]] const char* release() const { return release_[turn_].c_str(); }
  void next_owner() { turn_ = 1 - turn_; }

  /// Frees an acquire's reply; an error unless it granted the lock with a token above the
  /// last one.
  std::string check_granted(redisReply* reply) {
    const bool granted = reply->type == REDIS_REPLY_ARRAY && reply->elements >= 2 &&
                         reply->element[0]->type == REDIS_REPLY_INTEGER &&
                         reply->element[0]->integer == 1 && reply->element[1]->integer > token_;
    if (granted) token_ = reply->element[1]->integer;
    freeReplyObject(reply);
    return granted ? "" : "the acquire script did not grant the lock with a new token";
  }
  /// Frees a release's reply; an error unless it released the lock.
  static std::string check_released(redisReply* reply) {
    const bool released = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    freeReplyObject(reply);
    return released ? "" : "the release script did not release the lock";
  }

 private:
  static std::string key_prefix(const std::string& name) { return "dlock:{bench:" + name + "}:"; }
  std::vector<std::string> acquire_, release_;
  int turn_ = 0;
  long long token_ = 0;
};

// Cycles of those scripts with one awaited round trip, as a guarded call sends them: the
// acquire's reply is read together with the previous release's, and the release goes out at
// once without waiting for its reply.
class OneWaitCycles {
 public:
  OneWaitCycles(RawConnection& raw, const std::string& name) : raw_(raw), calls_(raw, name) {}
  OneWaitCycles(const OneWaitCycles&) = delete;
  OneWaitCycles& operator=(const OneWaitCycles&) = delete;
  ~OneWaitCycles() {
    try {
      if (release_unread_) freeReplyObject(raw_.next_reply());
    } catch (const std::exception&) {  // the connection is dropped with it
    }
  }

  /// One cycle; empty, or what went wrong (a reply that did not grant or release). Throws
  /// on a connection error.
  std::string step() {
    raw_.send(calls_.acquire());
    // Both replies are read before either is judged: the connection stays in step.
    const std::string released = std::exchange(release_unread_, false)
                                     ? DlockCalls::check_released(raw_.next_reply())
                                     : "";
    const std::string granted = calls_.check_granted(raw_.next_reply());
    if (!released.empty()) return released;
    if (!granted.empty()) return granted;
    raw_.send(calls_.release());
    release_unread_ = true;
    calls_.next_owner();
    return "";
  }

 private:
  RawConnection& raw_;
  DlockCalls calls_;
  bool release_unread_ = false;
};

}  // namespace dlock::bench
