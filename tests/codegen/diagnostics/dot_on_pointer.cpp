// `.` needs a value and `->` a pointer (or a class with operator->).
struct Order { long id = 0; };

[[dlock::guard("order:<order.id>")]] void ship(const Order* order) { (void)order; }
// CHECK: :[[@LINE-1]]:29: error: '.' on 'order', which is a pointer ('const Order *'); did you mean '->'?
// CHECK-NEXT: [[dlock::guard("order:<order.id>")]] void ship(const Order* order)
// CHECK-NEXT:                             ^
// CHECK-NEXT:                             ->

[[dlock::guard("order:<order->id>")]] void price(const Order& order) { (void)order; }
// CHECK: :[[@LINE-1]]:29: error: '->' on 'order', which is not a pointer ('const Order'); did you mean '.'?

[[dlock::guard("order:<id->value>")]] void cancel(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:26: error: '->' on 'id', which is not a pointer ('long')
