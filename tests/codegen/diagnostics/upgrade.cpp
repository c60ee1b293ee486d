// An exclusive guard called inside a shared guard on the same key is an upgrade: the runtime
// refuses it, so the generator does where it sees the nesting for certain.
#include <string>

#include "declares_publish.hpp"

struct Patch {
  std::string text;
};

[[dlock::guard("doc:<id>")]] void edit(long id, const Patch& patch) { (void)id; (void)patch; }

[[dlock::guard("doc:<id>", mode=shared)]]
std::string render(long id) {
  edit(id, Patch{});
// CHECK: :[[@LINE-1]]:3: error: exclusive guard 'edit' called inside shared guard 'render' on lock key "doc:<id>": an upgrade, which dlock refuses (it would deadlock)
// CHECK-NEXT:   edit(id, Patch{});
// CHECK-NEXT:   ^~~~~~~~~~~~~~~~~
// CHECK: :[[@LINE-6]]:3: note: shared guard given here
  return std::to_string(id);
}

// Another name for the parameter, several keys, a member chain, mode=exclusive written out.
struct Folder {
  long id = 0;
};

[[dlock::guard("folder:<folder.id>", "doc:<doc>", mode=exclusive, name="docs::move")]]
void move_doc(const Folder& folder, long doc) { (void)folder; (void)doc; }

[[dlock::guard("doc:<id>", "folder:<f.id>", mode=shared)]]
void preview(const Folder& f, long id) {
  if (id > 0) {
    move_doc((f), id);
// CHECK: :[[@LINE-1]]:5: error: exclusive guard 'docs::move' called inside shared guard 'preview' on lock key "doc:<id>": an upgrade
// CHECK: :[[@LINE-5]]:3: note: shared guard given here
  }
}

// A member function called on the same object; a key without placeholders.
class Library {
 public:
  [[dlock::guard("catalogue")]] void rebuild() {}

  [[dlock::guard("catalogue", mode=shared)]] int count() {
    rebuild();
// CHECK: :[[@LINE-1]]:5: error: exclusive guard 'Library::rebuild' called inside shared guard 'Library::count' on lock key "catalogue": an upgrade
// CHECK: :[[@LINE-3]]:5: note: shared guard given here
    return 1;
  }
};

// A guard declared in a header, defined elsewhere; a function template's guard.
template <typename T>
[[dlock::guard("doc:<id>")]] void stamp(long id, T mark) { (void)id; (void)mark; }

[[dlock::guard("doc:<id>", mode=shared)]]
void proofread(long id) {
  publish(id);
// CHECK: :[[@LINE-1]]:3: error: exclusive guard 'publish' called inside shared guard 'proofread' on lock key "doc:<id>": an upgrade
// CHECK: :[[@LINE-4]]:3: note: shared guard given here
  stamp(id, 'x');
// CHECK: :[[@LINE-1]]:3: error: exclusive guard 'stamp' called inside shared guard 'proofread' on lock key "doc:<id>": an upgrade
// CHECK: :[[@LINE-7]]:3: note: shared guard given here
}

// None of these is certain, so none is reported.
[[dlock::guard("doc:<id>", permits=2)]] void copy(long id) { (void)id; }
[[dlock::guard("doc:<id>", mode=shared)]] void show(long id) { (void)id; }
[[dlock::guard("doc:<id>", policy="slow")]] void archive(long id) { (void)id; }
[[dlock::guard("doc:<id>")]] int size_of(long id) { return static_cast<int>(id); }
[[dlock::guard("doc:<n>")]] void narrow(int n) { (void)n; }
[[dlock::guard("page:<id>")]] void edit_page(long id) { (void)id; }

struct Viewer {
  [[dlock::guard("doc:<id>")]] virtual void annotate(long id) { (void)id; }
  virtual ~Viewer() = default;
};

[[dlock::guard("doc:<id>", mode=shared)]]
void read_only(long id, long other, Viewer& viewer) {
  auto later = [id] { edit(id, Patch{}); };  // a lambda may run elsewhere
  later();
  edit(other, Patch{});                      // another parameter
  edit(id + 1, Patch{});                     // another value
  copy(id);                                  // a permit is not the shared lock
  show(id);                                  // shared inside shared
  archive(id);                               // another policy, perhaps another backend
  narrow(static_cast<int>(id));              // not a plain reference
  narrow(id);                                // another type
  edit_page(id);                             // another key
  viewer.annotate(id);                       // virtual: may run another function
  (void)sizeof(size_of(id));                 // not evaluated
  if constexpr (sizeof(long) == 0) edit(id, Patch{});  // discarded
  if consteval {
    edit(id, Patch{});                       // never runs: a guarded function is not constexpr
  }
  (void)__builtin_constant_p(size_of(id));   // not evaluated
}

[[dlock::guard("doc:<id>", mode=shared)]]
void after_change(long id) {
  id = id * 2;
  edit(id, Patch{});  // the key is no longer the shared one
}

[[dlock::guard("doc:<id>")]]
void exclusive_caller(long id) {
  edit(id, Patch{});  // reentrant, not an upgrade
}
