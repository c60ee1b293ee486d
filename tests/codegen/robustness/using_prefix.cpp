// `[[using dlock: guard(...)]]` is the same attribute.
// EXPECT-STATUS: 0
[[using dlock: guard("k:<id>")]] void f(int id) { (void)id; }
