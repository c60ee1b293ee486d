#include "shapes.hpp"

#include <cstdarg>
#include <stdexcept>

#include <dlock/dlock.hpp>

namespace woven {

std::string (*probe)(const std::string& key) = nullptr;
std::string seen_inside;

namespace {
void look(const std::string& key) { seen_inside = probe ? probe(key) : "no probe"; }
}  // namespace

int free_function(int id) {
  look("free:" + std::to_string(id));
  return id * 2;
}

int overloaded(int id) { return id; }

int overloaded(const std::string& name) {
  look("overload:" + name);
  return static_cast<int>(name.size());
}

void Ledger::in_class_member(int entry) { look("ledger:" + name_ + ":" + std::to_string(entry)); }

long Ledger::static_member(long id) {
  look("ledger-static:" + std::to_string(id));
  return id + 1;
}

[[dlock::guard("ledger-out:<this->name_>:<entry>")]]
void Ledger::out_of_line(int entry) { look("ledger-out:" + name_ + ":" + std::to_string(entry)); }

int& Ledger::reference_return(int slot) {
  look("ledger-ref:" + std::to_string(slot));
  return slots_[slot];
}

std::unique_ptr<int> move_only(int id) {
  look("move:" + std::to_string(id));
  return std::make_unique<int>(id);
}

int no_throw(int id) noexcept {
  look("noexcept:" + std::to_string(id));
  return id;
}

int with_default(int id, int scale) {
  look("defaults:" + std::to_string(id) + ":" + std::to_string(scale));
  return id * scale;
}

int c_variadic(int id, ...) {
  va_list args;
  va_start(args, id);
  int sum = 0;
  for (int i = 0; i < id; ++i) sum += va_arg(args, int);
  va_end(args);
  look("variadic:" + std::to_string(id));
  return sum;
}

void throws(int id) {
  look("throws:" + std::to_string(id));
  throw std::runtime_error("thrown inside a guard");
}

bool skip_bool(int id) {
  look("skip:" + std::to_string(id));
  return true;
}

std::optional<int> skip_optional(int id) { return id; }

void skip_void(int id, bool* ran) { *ran = id >= 0; }

int nested_inner(int id) { return dlock::current_lease().hold_count() + id * 0; }

int nested_outer(int id) { return nested_inner(id); }

std::string current_name(int id) {
  (void)id;
  const auto lease = dlock::current_lease();
  return lease.name() + "|" + lease.key().str();
}

void min_hold(int id) { look("min-hold:" + std::to_string(id)); }

long member_chain(const Account& account) {
  look("chain:" + std::to_string(account.owner.id) + ":" + std::to_string(account.manager->id));
  return account.owner.id;
}

// A function template and a member of a class template, defined where they are woven.
template <typename T>
[[dlock::guard("template:<value>")]]
T doubled(T value) {
  look("template:" + std::to_string(value));
  return value * 2;
}

template <typename T>
struct Box {
  T value;
  [[dlock::guard("box:<this->value>")]]
  T get() const {
    look("box:" + std::to_string(value));
    return value;
  }
};

int use_templates(int x) { return doubled(x) + Box<int>{x}.get(); }

}  // namespace woven
