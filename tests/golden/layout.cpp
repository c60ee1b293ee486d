// Layouts of the body's '{', and every option once.
namespace shop {

// The brace on its own line.
[[dlock::guard("a:<x>", lease=250ms, wait=0s, on_busy=skip, min_hold=30s, max_hold=1h, policy="reports", name="shop::layout_a")]]
void brace_own_line(int x)
{
  (void)x;
}

// Code after the brace on the same line keeps its line number.
[[dlock::guard("b:<x>", policy="reports")]] int same_line(int x) { return x * 2; }

// A comment between the attribute and the function.
[[dlock::guard("c")]]
// the function comes next
void commented() {
}

}  // namespace shop
