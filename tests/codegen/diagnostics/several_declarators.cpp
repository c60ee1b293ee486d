// One attribute before several declarators would guard them all with the same key.
[[dlock::guard("pair")]] void first(), second();
// CHECK: :[[@LINE-1]]:3: error: one 'dlock::guard' cannot guard several functions declared together; declare them separately
void first() {}
void second() {}
