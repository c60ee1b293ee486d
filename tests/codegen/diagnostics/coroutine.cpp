// A coroutine's body runs in pieces, possibly on other threads.
#include <coroutine>

struct Task {
  struct promise_type {
    Task get_return_object() { return {}; }
    std::suspend_never initial_suspend() { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() {}
  };
};

[[dlock::guard("job:<id>")]] Task run(int id) {
// CHECK: :[[@LINE-1]]:3: error: a coroutine cannot be guarded: the lock would live in the coroutine frame across suspensions; guard a function the coroutine calls
  (void)id;
  co_return;
}
