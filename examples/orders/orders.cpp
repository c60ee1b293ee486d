#include "orders.hpp"

#include <dlock/dlock.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <thread>

namespace shop {

Receipt OrderBook::place(const Order& order) {
  const auto lease = dlock::current_lease();
  journal("begin", order.id, lease.token());
  // The work the lock protects: long enough for other processes to collide with it.
  std::this_thread::sleep_for(std::chrono::milliseconds(2 + order.quantity % 3));
  journal("end", order.id, lease.token());
  return Receipt{order.id, lease.token()};
}

std::optional<Receipt> OrderBook::ship(long id) {
  const auto lease = dlock::current_lease();
  journal("begin", id, lease.token());
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  journal("end", id, lease.token());
  return Receipt{id, lease.token()};
}

Receipt OrderBook::track(long id) {
  const auto lease = dlock::current_lease();
  journal("read", id, lease.token());
  std::this_thread::sleep_for(std::chrono::milliseconds(3));  // long enough to meet other readers
  journal("end", id, lease.token());
  return Receipt{id, lease.token()};
}

void OrderBook::journal(const char* what, long order_id, std::uint64_t token) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);  // one clock for every process on this machine
  const std::string line = fmt::format("{} {} {} {} {}\n", what, order_id, token, ::getpid(),
                                       now.tv_sec * 1'000'000'000LL + now.tv_nsec);
  // O_APPEND writes of one short line are atomic: lines of different processes never mix.
  const int fd = ::open(journal_path_.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) return;
  [[maybe_unused]] auto written = ::write(fd, line.data(), line.size());
  ::close(fd);
}

}  // namespace shop
