// A guard from a macro cannot be removed from the source it is expanded in.
#define GUARDED [[dlock::guard("macro")]]

GUARDED void work() {}
// CHECK: :[[@LINE-1]]:1: error: 'dlock::guard' cannot come from a macro expansion; write it on the function itself
