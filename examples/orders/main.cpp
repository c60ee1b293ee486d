// Several processes place, ship and track orders on a handful of shared order ids. Every
// hold of an order is journaled; afterwards the journal is checked: no order was ever held by
// a writer (place, ship) beside any other holder, readers (track) overlapped only each other,
// and fencing tokens grew from writer to writer.
//
//   DLOCK_CONFIG=examples/orders/orders.yaml ./orders [PROCESSES] [ORDERS_PER_PROCESS]
#include <dlock/dlock.hpp>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <vector>

#include "orders.hpp"

namespace {

constexpr long kOrderIds = 5;

struct Counts {
  int placed = 0, shipped = 0, tracked = 0, skipped = 0, failed = 0;
};

int run_process(const std::string& journal, int orders, int index) {
  dlock::init();
  dlock::set_log_level(dlock::LogLevel::kWarn);  // busy orders are skipped on purpose: no info lines
  shop::OrderBook book(journal);
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  Counts counts;
  for (int i = 0; i < orders; ++i) {
    const long id = 1 + static_cast<long>(rng() % kOrderIds);
    try {
      if (i % 4 == 3) {
        if (book.ship(id)) {
          ++counts.shipped;
        } else {
          ++counts.skipped;  // busy: someone else had the order; skipped, as configured
        }
      } else if (i % 4 == 1) {
        book.track(id);
        ++counts.tracked;
      } else {
        book.place(shop::Order{id, shop::Customer{fmt::format("customer-{}", index)}, i});
        ++counts.placed;
      }
    } catch (const std::exception& e) {  // LockNotAcquired, BackendUnavailable
      fmt::print(stderr, "process {}: {}\n", index, e.what());
      ++counts.failed;
    }
  }
  fmt::print("  process {} (pid {}): placed {}, shipped {}, tracked {}, skipped busy {}, failed {}\n",
             index, ::getpid(), counts.placed, counts.shipped, counts.tracked, counts.skipped,
             counts.failed);
  std::fflush(stdout);
  return counts.failed == 0 ? 0 : 1;
}

struct Hold {
  long long begin = 0, end = 0;
  std::uint64_t token = 0;
  long pid = 0;
  bool reader = false;
};

// Pairs begin/read and end lines per process and order, then looks for overlapping holds.
int check_journal(const std::string& journal) {
  std::ifstream in(journal);
  std::map<std::pair<long, long>, Hold> open;  // (pid, order) -> hold in progress
  std::map<long, std::vector<Hold>> holds;      // order -> completed holds
  std::string what;
  long order = 0, pid = 0;
  std::uint64_t token = 0;
  long long at = 0;
  while (in >> what >> order >> token >> pid >> at) {
    if (what == "begin" || what == "read") {
      open[{pid, order}] = Hold{at, 0, token, pid, what == "read"};
    } else {
      Hold hold = open[{pid, order}];
      hold.end = at;
      holds[order].push_back(hold);
    }
  }
  int overlaps = 0, shared_reads = 0, token_regressions = 0;
  std::size_t total = 0;
  for (auto& [id, list] : holds) {
    std::sort(list.begin(), list.end(), [](const Hold& a, const Hold& b) { return a.begin < b.begin; });
    total += list.size();
    std::uint64_t last_writer_token = 0;
    for (std::size_t i = 0; i < list.size(); ++i) {
      bool beside_a_reader = false;
      for (std::size_t j = 0; j < i; ++j) {
        if (list[i].begin >= list[j].end) continue;  // j ended before i began
        if (list[i].reader && list[j].reader) {
          beside_a_reader = true;  // readers share the order
        } else {
          ++overlaps;
        }
      }
      shared_reads += beside_a_reader;
      if (!list[i].reader) {
        if (list[i].token <= last_writer_token) ++token_regressions;
        last_writer_token = list[i].token;
      }
    }
  }
  fmt::print("orders: {} holds of {} order ids, reads beside another read: {}, overlapping "
             "holds: {}, fencing token regressions: {}\n",
             total, holds.size(), shared_reads, overlaps, token_regressions);
  return overlaps == 0 && token_regressions == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int processes = argc > 1 ? std::atoi(argv[1]) : 4;
  const int orders = argc > 2 ? std::atoi(argv[2]) : 60;
  const auto journal = (std::filesystem::temp_directory_path() /
                        fmt::format("dlock-orders-{}.journal", ::getpid())).string();
  std::filesystem::remove(journal);
  fmt::print("{} processes x {} operations on {} shared order ids\n", processes, orders, kOrderIds);
  std::fflush(stdout);  // or every child would print the buffered banner again
  for (int p = 0; p < processes; ++p) {
    if (::fork() == 0) std::_Exit(run_process(journal, orders, p));
  }
  bool all_ok = true;
  for (int p = 0; p < processes; ++p) {
    int status = 0;
    ::wait(&status);
    all_ok = all_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  const int verdict = check_journal(journal);
  std::filesystem::remove(journal);
  return all_ok && verdict == 0 ? 0 : 1;
}
