// Free functions: namespaces (nested, anonymous), overloads, default arguments, noexcept,
// and every kind of return type.
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shop {

struct Receipt {
  long order_id = 0;
};

[[dlock::guard("order:<id>", lease=30s, wait=2s)]]
Receipt place_order(long id, const std::string& note) {
  return Receipt{id + static_cast<long>(note.size())};
}

namespace billing::v2 {

// Overloads share the guard name (the qualified function name) but not the key.
[[dlock::guard("invoice:<id>")]]
void close_invoice(int id) { (void)id; }

[[dlock::guard("invoice:<number>")]]
void close_invoice(const std::string& number) { (void)number; }

}  // namespace billing::v2

namespace {

// Anonymous namespaces do not show in the guard name.
[[dlock::guard("local:<n>", on_busy=skip)]] bool try_local(int n = 3) noexcept {
  return n > 0;
}

}  // namespace

bool call_local() { return try_local(); }

std::vector<int> g_values{1, 2, 3};

// A reference, a move-only type and std::optional as return types.
[[dlock::guard("values")]] std::vector<int>& values() { return g_values; }

[[dlock::guard("make:<size>")]] std::unique_ptr<Receipt> make_receipt(std::size_t size) {
  auto receipt = std::make_unique<Receipt>();
  receipt->order_id = static_cast<long>(size);
  return receipt;
}

[[dlock::guard("find:<id>", on_busy=skip, wait=0s)]]
std::optional<Receipt> find_receipt(long id) {
  if (id < 0) return std::nullopt;
  return Receipt{id};
}

// The attribute after the declarator-id, and spread over several lines: every line keeps
// its number.
void audit [[dlock::guard("audit:<who>",
                          lease=1m,
                          max_hold=10m)]] (const char* who) {
  (void)who;
}

// A C-style variadic function: its named parameters can be used.
[[dlock::guard("log:<level>")]] int log_line(int level, const char* format, ...) {
  return level + (format ? 1 : 0);
}

}  // namespace shop
