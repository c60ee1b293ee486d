// Key templates: placeholders with member chains, literal <, >, { and }, escapes, and
// adjacent literals.
#include <memory>
#include <string>

namespace shop {

struct Customer {
  long id = 0;
};

struct Order {
  Customer customer;
  Customer* referrer = nullptr;
  std::string sku;
};

class Account {
 public:
  // A chain through `this`, and fmt's braces written literally.
  [[dlock::guard("account:<this->owner.id>:{settings}")]] void update() {}

  Customer owner;
};

// `->` on a pointer, `.` on a value, `->` through a smart pointer.
[[dlock::guard("customer:<order->customer.id>:<order->referrer->id>")]]
void ship(const Order* order) { (void)order; }

[[dlock::guard("sku:<order.sku>")]] void price(const Order& order) { (void)order; }

[[dlock::guard("owned:<order->sku>")]] void archive(std::unique_ptr<Order> order) { (void)order; }

// << and >> are a literal < and >; spaces inside a placeholder are allowed.
[[dlock::guard("range:<<< lo >..< hi >>>")]] void scan(int lo, int hi) { (void)lo; (void)hi; }

// Escapes are kept as their bytes; adjacent literals concatenate.
[[dlock::guard("quote:\"<name>\"\t" "tab:<n>")]] void quote(const std::string& name, int n) {
  (void)name;
  (void)n;
}

}  // namespace shop
