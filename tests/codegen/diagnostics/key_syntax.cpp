// The grammar of placeholders, literal '<' and '>', and escapes.
[[dlock::guard("a:<>")]] void a() {}
// CHECK: :[[@LINE-1]]:19: error: empty placeholder '<>' in lock key; write '<<' for a literal '<'

[[dlock::guard("b:>")]] void b() {}
// CHECK: :[[@LINE-1]]:19: error: unmatched '>' in lock key; write '>>' for a literal '>'

[[dlock::guard("c:<x.>")]] void c(int x) { (void)x; }
// CHECK: :[[@LINE-1]]:22: error: expected a member name after '.' in placeholder

[[dlock::guard("d:<x+1>")]] void d(int x) { (void)x; }
// CHECK: :[[@LINE-1]]:21: error: unexpected '+' in placeholder; a placeholder is a parameter name or 'this', then .member or ->member

[[dlock::guard("e:<1x>")]] void e(int x) { (void)x; }
// CHECK: :[[@LINE-1]]:20: error: expected a parameter name or 'this' after '<' in lock key; write '<<' for a literal '<'

[[dlock::guard("f:\q")]] void f() {}
// CHECK: :[[@LINE-1]]:19: error: unknown escape sequence '\q'
