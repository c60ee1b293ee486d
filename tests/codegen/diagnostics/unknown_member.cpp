// Each member of a chain must exist in the record type; a near name is suggested.
struct Customer { long id = 0; };
struct Order { Customer customer; long total = 0; };
struct Base { long region = 0; };
struct Shipment : Base { Order order; };

[[dlock::guard("order:<order.customer.idd>")]] void ship(const Order& order) { (void)order; }
// CHECK: :[[@LINE-1]]:39: error: no member named 'idd' in 'Customer'; did you mean 'id'?

[[dlock::guard("region:<s.regoin>")]] void route(const Shipment& s) { (void)s; }
// CHECK: :[[@LINE-1]]:27: error: no member named 'regoin' in 'Shipment'; did you mean 'region'?

struct Account {
  [[dlock::guard("account:<this->ownr>")]] void close() {}
  // CHECK: :[[@LINE-1]]:34: error: no member named 'ownr' in 'Account'; did you mean 'owner'?
  long owner = 0;
  long balance() const { return owner; }
};

[[dlock::guard("total:<order.total.value>")]] void bill(const Order& order) { (void)order; }
// CHECK: :[[@LINE-1]]:36: error: 'order.total' has type 'long', which has no members

[[dlock::guard("balance:<a.balance>")]] void audit(const Account& a) { (void)a; }
// CHECK: :[[@LINE-1]]:28: error: 'balance' is not a data member of 'Account'; a lock key names data members only
