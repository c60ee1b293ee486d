// What a shared connection keeps (Connection::share()): the commands sent whose replies are
// due, in the order the server answers them, and for each the thread that reads its reply.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "redis/connection.hpp"
#include "wake_flag.hpp"

namespace dlock::internal {

struct Connection::Shared {
  struct Slot {
    std::thread::id reader;  // who reads the reply; none once detached or given up
    std::optional<Reply> reply;
    std::function<void(Reply)> on_reply;  // a detached command's
    Clock::time_point since;              // when it was sent (queued to be)
    std::uint64_t end = 0;                // sent whole once written_ reaches this
    bool waiting = false;                 // its reader sleeps on `wake`
    WakeFlag wake;                        // kReplied or kLead
  };
  /// Why a sleeping reader is woken: its reply is in (it takes it without the mutex), or it
  /// is to read for everyone.
  static constexpr std::uint32_t kReplied = 1;
  static constexpr std::uint32_t kLead = 2;
  struct Staged {
    std::thread::id thread;
    std::string bytes;
    std::size_t count = 0;
  };
  std::mutex mutex;
  std::deque<std::shared_ptr<Slot>> due;  // sent, reply not read yet, in order
  std::unordered_map<std::thread::id, std::deque<std::shared_ptr<Slot>>> unread;
  std::vector<Staged> staged;            // appended, not sent yet: one batch per thread
  bool reading = false;                  // a thread reads for everyone
  std::atomic<std::size_t> detached{0};  // slots in `due` with on_reply
  std::atomic<bool> retiring{false};
  std::chrono::microseconds spin{kDefaultSpin};  // callers waiting for replies spin first

  /// `thread`'s batch in `staged`, or staged.end().
  std::vector<Staged>::iterator staged_by(std::thread::id thread);
  /// Takes the first (or last) slot `thread` has not read; nullptr when there is none.
  std::shared_ptr<Slot> take_unread(std::thread::id thread, bool last);
};

// What to do once Shared::mutex is let go: hand detached replies over (on_reply may take
// other locks), and wake the threads whose replies came (woken, they would only wait for the
// mutex).
struct Connection::Handed {
  std::vector<std::pair<std::function<void(Reply)>, Reply>> replies;
  std::vector<std::shared_ptr<Shared::Slot>> woken;
  [[nodiscard]] bool empty() const noexcept { return replies.empty() && woken.empty(); }
  void run() noexcept {
    for (const auto& slot : woken) slot->wake.set(Shared::kReplied);
    woken.clear();
    for (auto& [on_reply, reply] : replies) on_reply(std::move(reply));
    replies.clear();
  }
};

}  // namespace dlock::internal
