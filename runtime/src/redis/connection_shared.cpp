// A connection shared by threads (Connection::share()): each thread's commands go out as one
// batch, replies come back in the order the commands went, and whichever thread waits reads
// for everyone (the others sleep until their own reply is in, or the reader leaves). While a
// reply is owed, the reader also sends: batches queued meanwhile go out together when that
// reply wakes it, so a busy connection carries many threads' commands in each send.
#include <fmt/format.h>

#include <algorithm>

#include "redis/connection_shared.hpp"
#include "redis/resp.hpp"
#include "redis/stream.hpp"

namespace dlock::internal {
namespace {

// The reader waits for the socket this long at most before it looks again at what other
// threads queued meanwhile (bytes the socket did not take then need POLLOUT too).
constexpr auto kReadSlice = std::chrono::milliseconds(5);

}  // namespace

void Connection::share(std::chrono::microseconds spin) {
  shared_ = std::make_unique<Shared>();
  shared_->spin = spin;
}

std::chrono::microseconds Connection::spin() const noexcept {
  return shared_ ? shared_->spin : std::chrono::microseconds{0};
}

bool Connection::retiring() const noexcept { return shared_ && shared_->retiring; }

void Connection::retire() noexcept {
  if (shared_) shared_->retiring = true;
}

std::size_t Connection::due() const {
  if (!shared_) return 0;
  std::lock_guard lock(shared_->mutex);
  return shared_->due.size();
}

std::size_t Connection::owed() const noexcept {
  return shared_ ? shared_->detached.load() : owed_.size();
}

std::vector<Connection::Shared::Staged>::iterator Connection::Shared::staged_by(
    std::thread::id thread) {
  return std::find_if(staged.begin(), staged.end(),
                      [&](const Staged& batch) { return batch.thread == thread; });
}

std::shared_ptr<Connection::Shared::Slot> Connection::Shared::take_unread(std::thread::id thread,
                                                                          bool last) {
  const auto mine = unread.find(thread);
  if (mine == unread.end()) return nullptr;
  auto& slots = mine->second;
  std::shared_ptr<Slot> slot = std::move(last ? slots.back() : slots.front());
  if (last) {
    slots.pop_back();
  } else {
    slots.pop_front();
  }
  if (slots.empty()) unread.erase(mine);
  return slot;
}

void Connection::stage(const std::vector<std::string_view>& argv) {
  const auto me = std::this_thread::get_id();
  std::lock_guard lock(shared_->mutex);
  auto it = shared_->staged_by(me);
  if (it == shared_->staged.end()) {
    it = shared_->staged.insert(shared_->staged.end(), Shared::Staged{me, {}, 0});
  }
  append_command(it->bytes, argv);
  ++it->count;
}

void Connection::publish(Handed& handed) {
  const auto me = std::this_thread::get_id();
  auto& staged = shared_->staged;
  const auto it = shared_->staged_by(me);
  if (it == staged.end()) return;
  const Shared::Staged batch = std::move(*it);
  staged.erase(it);
  // A thread reading for everyone sends the batch, with whatever else is queued by then, as
  // soon as the next reply wakes it (one send for many threads' commands), provided a reply
  // is coming: a command ahead of it went out whole. On the server it would wait behind
  // that command anyway.
  const bool leave_to_reader = shared_->reading && reply_coming();
  if (!broken_) out_ += batch.bytes;
  const std::uint64_t end = written_ + (out_.size() - sent_);
  auto& mine = shared_->unread[me];
  const auto now = Clock::now();
  for (std::size_t i = 0; i < batch.count; ++i) {
    auto slot = std::make_shared<Shared::Slot>();
    slot->reader = me;
    slot->since = now;
    slot->end = end;
    if (broken_) {
      slot->reply = failed_reply();  // never sent
    } else {
      shared_->due.push_back(slot);
    }
    mine.push_back(std::move(slot));
  }
  if (broken_ || leave_to_reader) return;
  if (!flush()) fail_due(handed);
}

bool Connection::reply_coming() const noexcept {
  return !shared_->due.empty() && shared_->due.front()->end <= written_;
}

void Connection::dispatch(Handed& handed) {
  auto& due = shared_->due;
  while (auto reply = parse_reply()) {
    if (due.empty()) {
      fail("a reply came that no command was waiting for");
      break;
    }
    const std::shared_ptr<Shared::Slot> slot = std::move(due.front());
    due.pop_front();
    if (slot->on_reply) {
      --shared_->detached;
      handed.replies.emplace_back(std::move(slot->on_reply), std::move(*reply));
    } else if (slot->reader != std::thread::id()) {
      slot->reply = std::move(*reply);
      if (slot->waiting) handed.woken.push_back(slot);
    }
  }
  if (broken_) fail_due(handed);
}

void Connection::fail_due(Handed& handed) {
  for (const auto& slot : shared_->due) {
    if (slot->on_reply) {
      --shared_->detached;
      handed.replies.emplace_back(std::move(slot->on_reply), failed_reply());
    } else if (slot->reader != std::thread::id()) {
      // Not a caller that gave up: that one has its reply already, and may be reading it.
      slot->reply = failed_reply();
      if (slot->waiting) handed.woken.push_back(slot);
    }
  }
  shared_->due.clear();
}

void Connection::lead(std::unique_lock<std::mutex>& lock, Clock::time_point deadline,
                      const std::function<bool()>& until) {
  // However the reading ends (an exception included), it passes on: publishers leave their
  // commands to a reader only while one is marked.
  struct Reading {
    Connection& conn;
    std::unique_lock<std::mutex>& lock;
    ~Reading() {
      if (!lock.owns_lock()) lock.lock();
      conn.shared_->reading = false;
      conn.pass_reading();
    }
  };
  Handed handed;
  {
    shared_->reading = true;
    const Reading reading{*this, lock};
    read_for_all(lock, deadline, until, handed);
    if (broken_) fail_due(handed);
  }
  if (!handed.empty()) {
    lock.unlock();
    handed.run();
    lock.lock();
  }
}

void Connection::read_for_all(std::unique_lock<std::mutex>& lock, Clock::time_point deadline,
                              const std::function<bool()>& until, Handed& handed) {
  bool over = false;
  Clock::time_point limit = deadline;
  while (!broken_) {
    const auto now = Clock::now();
    if (!over && (until() || now >= deadline)) {
      over = true;
      limit = later(now, command_timeout_);
    }
    if (over) {
      // What this thread was left to send (publish()) goes before it leaves. If the socket
      // will not take it all now, a waiting thread takes the reading over (its poll asks for
      // POLLOUT); with none, this one stays, reading meanwhile so that a server whose
      // replies fill the socket still takes the rest, up to a command timeout.
      if (!flush() || sent_ == out_.size() || waiting_reader()) return;
      if (now >= limit) {
        fail(fmt::format("could not send to {} in time", to_string(endpoint_)));
        return;
      }
    } else if (sent_ < out_.size() && !reply_coming() && !flush()) {
      // Commands queued while this thread waits go out when a reply wakes it
      // (read_available() sends first), or at once when no reply is coming to wake it.
      return;
    }
    if (!has_buffered()) {
      const int socket = fd();
      // POLLOUT only when the socket held back a send.
      const bool push = (send_blocked_ && !write_wants_read_) || read_wants_write_;
      const short events = static_cast<short>(POLLIN | (push ? POLLOUT : 0));
      lock.unlock();
      const bool ready = wait_for(socket, events, std::min(limit, Clock::now() + kReadSlice));
      lock.lock();
      if (!ready) continue;
    }
    read_available();
    dispatch(handed);
    if (!handed.empty()) {
      lock.unlock();
      handed.run();
      lock.lock();
    }
  }
}

bool Connection::waiting_reader() const noexcept {
  return std::any_of(shared_->due.begin(), shared_->due.end(),
                     [](const auto& slot) { return slot->waiting; });
}

void Connection::pass_reading() {
  for (const auto& slot : shared_->due) {
    if (slot->waiting) {
      slot->wake.set(Shared::kLead);
      return;
    }
  }
}

void Connection::give_up(std::thread::id me) {
  shared_->retiring = true;
  const auto mine = shared_->unread.find(me);
  if (mine == shared_->unread.end()) return;
  for (const auto& slot : mine->second) {
    if (slot->reply) continue;
    slot->reader = std::thread::id();
    slot->reply = Reply::failed(Reply::Status::kTimeout,
                                "an earlier reply of the same call did not come in time");
  }
}

Reply Connection::read_shared(Clock::time_point deadline) {
  const auto me = std::this_thread::get_id();
  Handed handed;
  std::unique_lock lock(shared_->mutex);
  publish(handed);
  const std::shared_ptr<Shared::Slot> slot = shared_->take_unread(me, false);
  if (!slot)
    return Reply::failed(Reply::Status::kNotSent, "no command was sent to read a reply for");
  while (!slot->reply) {
    if (broken_) {
      fail_due(handed);
    } else if (Clock::now() >= deadline) {
      // This reply and the later ones of the same call are read and dropped when they come.
      slot->reader = std::thread::id();
      slot->reply = Reply::failed(
          Reply::Status::kTimeout,
          fmt::format("no reply from {} within the command timeout", to_string(endpoint_)));
      give_up(me);
      // A reader told to take over may have been this thread, past its deadline by then.
      if (!shared_->reading) pass_reading();
    } else if (!shared_->reading) {
      lead(lock, deadline, [&] { return slot->reply.has_value(); });
    } else {
      slot->waiting = true;
      slot->wake.reset();
      lock.unlock();
      if (slot->wake.wait_until(deadline, shared_->spin) == Shared::kReplied) {
        // The reader wrote the reply, and took the slot off `due`, before it woke this thread.
        handed.run();
        return std::move(*slot->reply);
      }
      lock.lock();
      slot->waiting = false;
    }
  }
  lock.unlock();
  handed.run();
  return std::move(*slot->reply);
}

bool Connection::flush_shared(Clock::time_point deadline) {
  Handed handed;
  std::unique_lock lock(shared_->mutex);
  publish(handed);
  // With a thread reading, the commands are left for it to send (publish()).
  const bool left_to_reader = shared_->reading;
  while (!left_to_reader && !broken_ && sent_ < out_.size() && flush() && sent_ < out_.size()) {
    // The others go on meanwhile: a reader may send the rest itself.
    const int socket = fd();
    const short events = write_wants_read_ ? POLLIN : POLLOUT;
    lock.unlock();
    const bool ready = wait_for(socket, events, deadline);
    lock.lock();
    if (!ready && sent_ < out_.size()) {
      // Part of a command may be out: the connection is out of step for everyone.
      fail(fmt::format("could not send to {} in time", to_string(endpoint_)));
    }
  }
  if (broken_) fail_due(handed);
  const bool sent = !broken_;
  lock.unlock();
  handed.run();
  return sent;
}

void Connection::detach_shared(std::function<void(Reply)> on_reply) {
  const auto me = std::this_thread::get_id();
  std::unique_lock lock(shared_->mutex);
  const std::shared_ptr<Shared::Slot> slot = shared_->take_unread(me, true);
  if (!slot) {
    lock.unlock();
    on_reply(Reply::failed(Reply::Status::kNotSent, "no command was sent"));
    return;
  }
  if (slot->reply) {  // read already
    lock.unlock();
    on_reply(std::move(*slot->reply));
    return;
  }
  slot->reader = std::thread::id();
  slot->on_reply = std::move(on_reply);
  ++shared_->detached;
}

bool Connection::settle_shared(Clock::time_point deadline) {
  std::unique_lock lock(shared_->mutex);
  // A thread reading reads these replies too.
  if (!shared_->reading && shared_->detached > 0 && !broken_) {
    lead(lock, deadline, [this] { return shared_->detached == 0; });
    if (shared_->detached > 0 && !broken_) shared_->retiring = true;
  }
  return !broken_ && !shared_->retiring;
}

void Connection::forget_thread() noexcept {
  if (!shared_) return;
  const auto me = std::this_thread::get_id();
  std::lock_guard lock(shared_->mutex);
  if (const auto it = shared_->staged_by(me); it != shared_->staged.end()) {
    shared_->staged.erase(it);
  }
  const auto mine = shared_->unread.find(me);
  if (mine == shared_->unread.end()) return;
  for (const auto& slot : mine->second) slot->reader = std::thread::id();
  shared_->unread.erase(mine);
}

// Replies read already go to their detached commands; the others never come.
void Connection::close_shared() noexcept {
  Handed handed;
  {
    std::lock_guard lock(shared_->mutex);
    if (!broken_) dispatch(handed);
    if (!broken_) {
      fail(shared_->retiring ? "closed after a command got no reply in time"
                             : "closed before the reply came");
    }
    fail_due(handed);
  }
  handed.run();
}

}  // namespace dlock::internal
