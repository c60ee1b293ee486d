// A defaulted function has no body to weave into.
struct Point {
  int x = 0;
  [[dlock::guard("point:assign")]] Point& operator=(const Point&) = default;
  // CHECK: :[[@LINE-1]]:5: error: a defaulted function cannot be guarded: it has no body to weave into; write the body out
};
