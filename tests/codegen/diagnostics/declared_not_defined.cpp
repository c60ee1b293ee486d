// A guard on a declaration in the source being woven, whose definition is elsewhere, would
// be lost: the defining file does not see it.
[[dlock::guard("sync")]] void sync();
// CHECK: :[[@LINE-1]]:3: error: 'sync' is guarded here but not defined in this file, so the guard would be lost; guard the definition, or a declaration in a header that the defining file includes

void run() { sync(); }
