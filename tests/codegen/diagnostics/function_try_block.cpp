// The handlers of a function-try-block would catch the guard's own exceptions.
[[dlock::guard("risky")]] void risky() try {
// CHECK: :[[@LINE-1]]:3: error: a function-try-block cannot be guarded: its handlers would catch the guard's own exceptions; put the try block inside the body
} catch (...) {
}
