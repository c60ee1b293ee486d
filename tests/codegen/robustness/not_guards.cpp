// Mentions that are not guards: a comment, a string, a skipped block, an unused macro.
// EXPECT-STATUS: 0
// [[dlock::guard("comment")]] void commented() {}
const char* kText = "[[dlock::guard(\"string\")]]";
#if 0
[[dlock::guard("skipped")]] void skipped() {}
#endif
#define UNUSED_GUARD [[dlock::guard("unused")]]
void plain() {}
