// on_busy=skip must know what a skipped call returns: void, bool or std::optional<T>.
#include <optional>
#include <string>

[[dlock::guard("count", on_busy=skip)]] int count() { return 1; }
// CHECK: :[[@LINE-1]]:33: error: on_busy=skip needs a function returning void, bool or std::optional<T>; 'count' returns 'int'

[[dlock::guard("name", on_busy=skip)]] const std::optional<std::string>& name();
// CHECK: :[[@LINE-1]]:32: error: on_busy=skip needs a function returning void, bool or std::optional<T>; 'name' returns 'const std::optional<std::string> &'
const std::optional<std::string>& name() { static std::optional<std::string> n; return n; }

template <typename T>
[[dlock::guard("get", on_busy=skip)]] T get() { return T(); }
// CHECK: :[[@LINE-1]]:31: error: on_busy=skip needs a function returning void, bool or std::optional<T>; 'T' depends on template parameters, write one of those types out

[[dlock::guard("find", on_busy=skip)]] auto find() { return std::optional<int>(); }
// CHECK: :[[@LINE-1]]:32: error: on_busy=skip needs a function returning void, bool or std::optional<T>; with a deduced return type, write std::optional<...> out
