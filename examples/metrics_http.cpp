// Serves dlock's metrics as Prometheus text on http://127.0.0.1:<port>/metrics while a few
// workers take locks. Bounded: exits after N requests or T seconds, whichever comes first.
//
//   metrics_http [port=9464] [requests=10] [seconds=30]
//   curl -s http://127.0.0.1:9464/metrics
//
// It uses the memory backend so it runs anywhere; point DLOCK_CONFIG at a real configuration
// and drop the init() call to watch real locks.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"

namespace {

using namespace std::chrono_literals;

void work(int worker, const std::atomic<bool>& stop) {
  dlock::LockSettings s;
  s.lease = 2s;
  s.wait = 4ms;  // short, so that some calls give up: busy_total moves too
  for (int i = 0; !stop; ++i) {
    const std::string key = fmt::format("order:{}", i % 3);  // three keys, shared by the workers
    if (dlock::Lease lease = dlock::client().acquire(key, s, "orders::place")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5 + worker));
    }
  }
}

void answer(int connection) {
  char request[1024];
  (void)::recv(connection, request, sizeof request, 0);  // any request gets the metrics
  const std::string body = dlock::prometheus_text(dlock::client());
  const std::string response = fmt::format(
      "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
      "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
      body.size(), body);
  for (std::size_t sent = 0; sent < response.size();) {
    const ssize_t n = ::send(connection, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  ::close(connection);
}

}  // namespace

int main(int argc, char** argv) {
  const int port = argc > 1 ? std::atoi(argv[1]) : 9464;
  const int max_requests = argc > 2 ? std::atoi(argv[2]) : 10;
  const auto run_for = std::chrono::seconds(argc > 3 ? std::atoi(argv[3]) : 30);

  dlock::Config config;
  config.service = "metrics-http";
  config.backends["default"].name = "default";
  config.backends["default"].topology = dlock::Topology::kMemory;
  dlock::init(config);

  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  const int yes = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener, 16) != 0) {
    fmt::print(stderr, "metrics_http: cannot listen on 127.0.0.1:{}\n", port);
    return 1;
  }
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  fmt::print("serving http://127.0.0.1:{}/metrics for {} requests or {}s\n", ntohs(address.sin_port),
             max_requests, run_for.count());
  std::fflush(stdout);

  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 3; ++w) workers.emplace_back(work, w, std::cref(stop));

  const auto end = std::chrono::steady_clock::now() + run_for;
  for (int served = 0; served < max_requests;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left <= 0ms) break;
    pollfd ready{listener, POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(left.count())) <= 0) continue;
    if (const int connection = ::accept(listener, nullptr, nullptr); connection >= 0) {
      answer(connection);
      ++served;
    }
  }
  ::close(listener);
  stop = true;
  for (auto& t : workers) t.join();
  dlock::shutdown();
  return 0;
}
