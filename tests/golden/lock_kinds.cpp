// Lock kinds (DESIGN §7): a shared guard beside an exclusive one on the same key, a fair
// guard, a semaphore of permits, and one guard over two keys.
#include <string>

namespace docs {

struct Patch {
  std::string text;
};

[[dlock::guard("doc:<id>", mode=shared)]]
std::string render(long id) { return std::to_string(id); }

[[dlock::guard("doc:<id>", mode=exclusive, lease=10s)]]
void edit(long id, const Patch& patch) { (void)id; (void)patch; }

}  // namespace docs

[[dlock::guard("ticket:<id>", fair=true)]] void serve(long id) { (void)id; }

[[dlock::guard("export:<region>", permits=3, wait=1m, fair=false)]]
void export_report(const std::string& region) { (void)region; }

// Every key or none; the runtime takes them in one order, whatever the order written here.
[[dlock::guard("account:<from>", "account:" "<to>", lease=10s, on_busy=skip)]]
bool transfer(long from, long to, long cents) { return from != to && cents > 0; }
