// Member functions: static and non-static, in the class body and out of line, const,
// operators, and other attributes sharing the guard's [[...]].
#include <string>

namespace shop {

struct Owner {
  long id = 0;
};

class OrderBook {
 public:
  [[nodiscard, dlock::guard("book:<this->owner.id>:order:<id>")]] bool place(long id) {
    return id != owner.id;
  }

  // Declared here, defined out of line below: the guard goes with the declaration.
  [[dlock::guard("book:<this->owner.id>:cancel:<id>", on_busy=skip)]] void cancel(long id);

  [[dlock::guard("book:count", on_busy=throw)]] int count() const { return count_; }

  // Guarded on its out-of-line definition instead.
  static void rebuild(const std::string& reason);

  [[dlock::guard("book:index:<i>")]] long operator[](int i) const { return owner.id + i; }

  [[dlock::guard("book:stats:<level>")]] static int stats(int level) { return level; }

  Owner owner;

 private:
  int count_ = 0;
};

void OrderBook::cancel(long id) {
  count_ -= static_cast<int>(id);
}

// Guarded on the definition only, with the attribute after a first one.
[[maybe_unused]] [[dlock::guard("book:rebuild:<reason>", name="shop::rebuild_all")]]
void OrderBook::rebuild(const std::string& reason) {
  (void)reason;
}

namespace detail {

struct Journal {
  // The guard first, then another attribute in the same [[...]].
  [[dlock::guard("journal:<entry>"), nodiscard]] int append(int entry) { return entry; }
};

}  // namespace detail

}  // namespace shop
