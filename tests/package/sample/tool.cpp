// Built only with -DSAMPLE_UNWOVEN_TOOL=ON: a target that includes shelf.hpp, which defines
// guarded functions, without dlock_weave(); the build must fail and name both.
#include "shelf.hpp"

int main() { return inventory::Shelf("south").restock(1) ? 0 : 1; }
