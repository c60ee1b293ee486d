// For postgres_selftest.cpp: a test program that is killed with SIGKILL while its PostgreSQL
// server runs (or is paused, with --pause). Starts a server, opens one client connection,
// prints the server's directory on one line and its process ids on the next, then sleeps
// (60 s at most) until it is killed.
#include <chrono>
#include <iostream>
#include <string_view>
#include <thread>

#include "postgres_server.hpp"

int main(int argc, char** argv) {
  const bool pause = argc > 1 && std::string_view(argv[1]) == "--pause";
  dlock::test::PostgresServer server;
  server.start();
  dlock::test::PostgresClient client(server.dsn(), "holder");
  if (!client.ping()) return 2;
  if (pause) server.pause();
  std::cout << server.dir().string() << '\n';
  for (const pid_t pid : server.process_ids()) std::cout << pid << ' ';
  std::cout << std::endl;
  std::this_thread::sleep_for(std::chrono::seconds(60));
  return 1;
}
