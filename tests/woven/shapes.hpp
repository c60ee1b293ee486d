// Guarded functions of every shape dlock_weave() supports; shapes.cpp defines them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace woven {

/// Set by the test: asks another process whether a key is held right now.
extern std::string (*probe)(const std::string& key);
/// What the probe said inside the last guarded body.
extern std::string seen_inside;

struct Account {
  struct Owner {
    long id = 0;
  };
  Owner owner;
  const Owner* manager = nullptr;
};

[[dlock::guard("free:<id>", lease=2s)]]
int free_function(int id);

int overloaded(int id);
[[dlock::guard("overload:<name>")]]
int overloaded(const std::string& name);

class Ledger {
 public:
  [[dlock::guard("ledger:<this->name_>:<entry>")]]
  void in_class_member(int entry);

  [[dlock::guard("ledger-static:<id>")]]
  static long static_member(long id);

  void out_of_line(int entry);

  [[dlock::guard("ledger-ref:<slot>")]]
  int& reference_return(int slot);

  std::string name_ = "main";
  int slots_[4] = {};
};

[[dlock::guard("move:<id>")]]
std::unique_ptr<int> move_only(int id);

[[dlock::guard("noexcept:<id>")]]
int no_throw(int id) noexcept;

[[dlock::guard("defaults:<id>:<scale>")]]
int with_default(int id, int scale = 3);

[[dlock::guard("variadic:<id>")]]
int c_variadic(int id, ...);

[[dlock::guard("throws:<id>")]]
void throws(int id);

[[dlock::guard("skip:<id>", on_busy=skip)]]
bool skip_bool(int id);

[[dlock::guard("skip:<id>", on_busy=skip)]]
std::optional<int> skip_optional(int id);

[[dlock::guard("skip:<id>", on_busy=skip)]]
void skip_void(int id, bool* ran);

[[dlock::guard("nested:<id>")]]
int nested_outer(int id);
[[dlock::guard("nested:<id>")]]
int nested_inner(int id);

[[dlock::guard("min-hold:<id>", min_hold=800ms)]]
void min_hold(int id);

[[dlock::guard("chain:<account.owner.id>:<account.manager->id>")]]
long member_chain(const Account& account);

/// `current_lease()` inside the body: "NAME|KEY".
[[dlock::guard("current:<id>")]]
std::string current_name(int id);

/// Calls a guarded function template and a guarded member of a class template.
int use_templates(int x);

}  // namespace woven
