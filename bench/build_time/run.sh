#!/usr/bin/env bash
# Build cost of weaving: a generated project of SOURCES sources, all including one project
# header that declares the guarded functions, of which GUARDED sources define guarded
# functions. It is built from scratch with Ninja (-j JOBS), alternately without weaving (the
# same target linking dlock::runtime, no dlock_weave) and with dlock_weave(), RUNS times
# each, the order swapped every other run. Printed: each build's wall and CPU time (user +
# sys of everything Ninja ran; steadier than wall time on a shared machine), where a woven
# build's time went (generator runs that parsed, fast-path runs, compiler; from Ninja's
# log), and the medians and their ratios (configure not included).
#
#   bench/build_time/run.sh [--build-dir DIR] [--sources N] [--guarded K] [--runs R]
#                           [--jobs J] [--build-type TYPE] [--shape declared|defined] [--keep]
#
# --shape defined: the header defines the two guarded functions itself (a member in its class
# body and an inline function), so every source compiles them; the first source woven parses,
# the others use its woven copy of the header (shared copies, codegen/README.md).
#
# DIR is a dlock build tree in which dlock-codegen and the runtime are built (default:
# ./build); it is installed into a scratch prefix with `cmake --install`, and the project
# uses find_package(dlock), as a user's project does. The last line printed is
#   RESULT build_time plain_s=<median> woven_s=<median> ratio=<woven/plain>
set -euo pipefail

build_dir=build sources=20 guarded=2 runs=3 jobs=2 build_type=RelWithDebInfo keep=0 shape=declared
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --sources) sources=$2; shift 2 ;;
    --guarded) guarded=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-type) build_type=$2; shift 2 ;;
    --shape) shape=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for number in "$sources" "$guarded" "$runs" "$jobs"; do
  [[ "$number" =~ ^[0-9]+$ ]] || { echo "run.sh: '$number' is not a number" >&2; exit 2; }
done
# The header declares two guarded functions, each defined (so woven) in its own source: any
# other --guarded would leave one undefined or one unwoven.
(( sources >= 3 && guarded == 2 && runs >= 1 && jobs >= 1 )) || {
  echo "run.sh: need sources >= 3, guarded = 2 (the two guarded functions of the header), runs >= 1, jobs >= 1" >&2
  exit 2
}
[[ $shape == declared || $shape == defined ]] ||
  { echo "run.sh: --shape is declared or defined, not '$shape'" >&2; exit 2; }
[[ -f "$build_dir/CMakeCache.txt" ]] || { echo "run.sh: '$build_dir' is not a CMake build tree" >&2; exit 2; }
command -v ninja >/dev/null || { echo "run.sh: ninja is not installed" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-build-time.XXXXXX")
cleanup() { if [[ $keep == 0 ]]; then rm -rf "$work"; else echo "kept $work" >&2; fi; }
trap cleanup EXIT

cmake --install "$build_dir" --prefix "$work/prefix" >"$work/install.log" ||
  { cat "$work/install.log" >&2; echo "run.sh: install failed (build the whole tree first: ninja -C $build_dir)" >&2; exit 1; }
[[ -x "$work/prefix/bin/dlock-codegen" ]] ||
  { echo "run.sh: no dlock-codegen in '$build_dir' (build it first: ninja dlock-codegen)" >&2; exit 1; }

# --- The project ----------------------------------------------------------------------------
project=$work/project
mkdir -p "$project/include/shop" "$project/src"
cat >"$project/include/shop/shop.hpp" <<'EOF'
// The project's shared header: types, and the functions that hold a distributed lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shop {

struct Item {
  std::string sku;
  int quantity = 0;
  std::int64_t price_cents = 0;
};

struct Cart {
  std::vector<Item> items;
  std::optional<std::string> coupon;
};

struct Receipt {
  long order_id = 0;
  std::int64_t total_cents = 0;
  std::chrono::system_clock::time_point at;
};

std::int64_t total_of(const Cart& cart);
std::string describe(const Item& item);

EOF
if [[ $shape == declared ]]; then
  cat >>"$project/include/shop/shop.hpp" <<'EOF'
[[dlock::guard("order:<id>", lease=30s)]]
Receipt place_order(long id, const Cart& cart);

class Inventory {
 public:
  [[dlock::guard("stock:<sku>", lease=10s, wait=2s)]]
  bool reserve(const std::string& sku, int quantity);

  int available(const std::string& sku) const;

 private:
  std::map<std::string, int> stock_;
};

}  // namespace shop
EOF
else
  cat >>"$project/include/shop/shop.hpp" <<'EOF'
[[dlock::guard("order:<id>", lease=30s)]]
inline Receipt place_order(long id, const Cart& cart) {
  return Receipt{id, total_of(cart), std::chrono::system_clock::now()};
}

class Inventory {
 public:
  [[dlock::guard("stock:<sku>", lease=10s, wait=2s)]]
  bool reserve(const std::string& sku, int quantity) {
    auto found = stock_.find(sku);
    if (found == stock_.end() || found->second < quantity) return false;
    found->second -= quantity;
    return true;
  }

  int available(const std::string& sku) const;

 private:
  std::map<std::string, int> stock_;
};

}  // namespace shop
EOF
fi

# Source i: ordinary code over the shared header; 0 and 1 define the guarded functions.
write_source() {
  local i=$1 file=$project/src/part$(printf '%02d' "$1").cpp
  {
    echo "// Generated part $i of the build-time benchmark project."
    echo '#include "shop/shop.hpp"'
    echo
    echo '#include <algorithm>'
    echo '#include <numeric>'
    echo '#include <sstream>'
    echo '#include <unordered_map>'
    echo
    echo 'namespace shop {'
    if (( i == 0 && guarded >= 1 )) && [[ $shape == declared ]]; then
      cat <<'EOF'

Receipt place_order(long id, const Cart& cart) {
  return Receipt{id, total_of(cart), std::chrono::system_clock::now()};
}

std::int64_t total_of(const Cart& cart) {
  return std::accumulate(cart.items.begin(), cart.items.end(), std::int64_t{0},
                         [](std::int64_t sum, const Item& item) {
                           return sum + item.price_cents * item.quantity;
                         });
}
EOF
    elif (( i == 0 )); then
      cat <<'EOF'

std::int64_t total_of(const Cart& cart) {
  std::int64_t sum = 0;
  for (const Item& item : cart.items) sum += item.price_cents * item.quantity;
  return sum;
}
EOF
    fi
    if (( i == 1 && guarded >= 2 )) && [[ $shape == declared ]]; then
      cat <<'EOF'

bool Inventory::reserve(const std::string& sku, int quantity) {
  auto found = stock_.find(sku);
  if (found == stock_.end() || found->second < quantity) return false;
  found->second -= quantity;
  return true;
}

int Inventory::available(const std::string& sku) const {
  auto found = stock_.find(sku);
  return found == stock_.end() ? 0 : found->second;
}

std::string describe(const Item& item) {
  std::ostringstream out;
  out << item.sku << " x" << item.quantity;
  return out.str();
}
EOF
    elif (( i == 1 )); then
      cat <<'EOF'

int Inventory::available(const std::string& sku) const {
  auto found = stock_.find(sku);
  return found == stock_.end() ? 0 : found->second;
}

std::string describe(const Item& item) { return item.sku; }
EOF
    fi
    cat <<EOF

namespace {

struct Tally$i {
  std::unordered_map<std::string, std::vector<Item>> by_sku;
  std::map<long, Receipt> receipts;
};

std::vector<Item> sorted_items$i(std::vector<Item> items) {
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.price_cents < b.price_cents; });
  return items;
}

}  // namespace

std::string report$i(const std::vector<Cart>& carts, Inventory& inventory) {
  Tally$i tally;
  std::ostringstream out;
  long id = $i * 1000;
  for (const Cart& cart : carts) {
    for (const Item& item : sorted_items$i(cart.items)) {
      tally.by_sku[item.sku].push_back(item);
      if (inventory.reserve(item.sku, item.quantity)) out << describe(item) << "\n";
    }
    const Receipt receipt = place_order(++id, cart);
    tally.receipts.emplace(receipt.order_id, receipt);
  }
  for (const auto& [sku, items] : tally.by_sku) {
    out << sku << ": " << items.size() << " lines, " << inventory.available(sku) << " left\n";
  }
  return out.str();
}

}  // namespace shop
EOF
  } >"$file"
}
for (( i = 0; i < sources - 1; ++i )); do write_source "$i"; done
last=$(( sources - 1 ))
cat >"$project/src/part$(printf '%02d' "$last").cpp" <<EOF
// Generated: the program's main.
#include <iostream>

#include "shop/shop.hpp"

namespace shop {
EOF
for (( i = 0; i < sources - 1; ++i )); do
  echo "std::string report$i(const std::vector<Cart>& carts, Inventory& inventory);" \
    >>"$project/src/part$(printf '%02d' "$last").cpp"
done
{
  echo '}  // namespace shop'
  echo
  echo 'int main() {'
  echo '  shop::Inventory inventory;'
  echo '  const std::vector<shop::Cart> carts{shop::Cart{{shop::Item{"sku-1", 1, 100}}, std::nullopt}};'
  for (( i = 0; i < sources - 1; ++i )); do echo "  std::cout << shop::report$i(carts, inventory);"; done
  echo '}'
} >>"$project/src/part$(printf '%02d' "$last").cpp"

cat >"$project/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.20)
project(shop CXX)
set(CMAKE_CXX_STANDARD 17)
option(WEAVE "weave the guards" ON)
find_package(dlock CONFIG REQUIRED)
file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)
add_executable(shop ${sources})
target_include_directories(shop PRIVATE include)
# The guards stay on the header declarations, which g++ does not know.
target_compile_options(shop PRIVATE -Wno-attributes=dlock::)
if(WEAVE)
  dlock_weave(shop)
else()
  target_link_libraries(shop PRIVATE dlock::runtime)
endif()
EOF

# --- The runs -------------------------------------------------------------------------------
# One build from scratch; prints its seconds. Configure is not timed.
build_once() {
  local weave=$1 dir=$work/build-$1
  rm -rf "$dir"
  cmake -S "$project" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DWEAVE="$weave" \
    -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_COMPILER_LAUNCHER= >"$work/configure-$weave.log" 2>&1 ||
    { cat "$work/configure-$weave.log" >&2; echo "run.sh: configure failed" >&2; return 1; }
  # Wall time, and the CPU time of ninja and everything it ran (less sensitive to the load of
  # other work on a shared machine).
  local TIMEFORMAT='%R %U %S' times
  times=$( { time ninja -C "$dir" -j "$jobs" >"$work/build-$weave.log" 2>&1; } 2>&1 ) ||
    { cat "$work/build-$weave.log" >&2; echo "run.sh: build failed" >&2; return 1; }
  if [[ $weave == ON ]]; then
    local woven
    woven=$(grep -c "Weaving" "$work/build-ON.log" || true)
    [[ "$woven" == "$sources" ]] || { echo "run.sh: wove $woven sources, expected $sources" >&2; return 1; }
    local guards
    if [[ $shape == declared ]]; then
      guards=$(cat "$dir"/dlock_woven/shop/src/*.cpp | grep -c "::dlock::Guard dlock_guard_" || true)
    else  # in the woven copies of shop.hpp (more than one when two parses ran at once)
      guards=$(cat "$(find "$dir/dlock_woven/shop" -name shop.hpp | head -n 1)" | grep -c "::dlock::Guard dlock_guard_" || true)
    fi
    [[ "$guards" == "$guarded" ]] || { echo "run.sh: $guards guards woven, expected $guarded" >&2; return 1; }
  fi
  awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' <<<"$times"
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Where a woven build's time goes, from Ninja's log of its edges (milliseconds each).
profile() {
  local dir=$1 parsed_files
  # A parse lists system headers in the depfile; the fast paths list project files only.
  parsed_files=$(grep -l "^ */usr/include/" "$dir"/dlock_woven/shop/src/*.cpp.d | xargs -n1 basename | sed 's/\.d$//' | tr '\n' ' ')
  awk -v parsed_files="$parsed_files" '
    NR > 1 && $4 !~ /^\// {
      ms = $2 - $1
      if ($4 ~ /dlock_woven\/.*\.cpp$/) { weave[$4] = ms }
      else if ($4 ~ /\.o$/) { if (!($4 in compile)) objects++; compile[$4] = ms }
    }
    END {
      for (f in weave) {
        name = f; sub(/.*\//, "", name)
        if (index(" " parsed_files, " " name " ") > 0) { parsed_n++; parsed += weave[f] } else { fast_n++; fast += weave[f] }
      }
      for (f in compile) total += compile[f]
      printf "  generator: %d sources parsed %.2f s, %d fast path %.2f s; compiler: %.2f s for %d objects\n",
             parsed_n, parsed / 1000, fast_n, fast / 1000, total / 1000, objects
    }' "$dir/.ninja_log"
}

plain=() woven=() plain_cpu=() woven_cpu=()
echo "project: $sources sources, $guarded guards $shape in one shared header; ninja -j $jobs, $build_type"
for (( run = 1; run <= runs; ++run )); do
  # Plain first in odd runs, woven first in even ones: a load that grows or shrinks during
  # the runs does not favour either.
  if (( run % 2 == 1 )); then
    result=$(build_once OFF); read -r p pc <<<"$result"
    result=$(build_once ON); read -r w wc <<<"$result"
  else
    result=$(build_once ON); read -r w wc <<<"$result"
    result=$(build_once OFF); read -r p pc <<<"$result"
  fi
  plain+=("$p"); plain_cpu+=("$pc"); woven+=("$w"); woven_cpu+=("$wc")
  printf 'run %d: plain %.2f s (cpu %.2f s), woven %.2f s (cpu %.2f s)\n' "$run" "$p" "$pc" "$w" "$wc"
  echo "  plain compiler: $(awk 'NR > 1 && $4 ~ /\.o$/ { t += $2 - $1 } END { printf "%.2f s", t / 1000 }' "$work/build-OFF/.ninja_log")"
  profile "$work/build-ON"
done
ratio_of() { awk -v w="$1" -v p="$2" 'BEGIN { printf "%.3f", w / p }'; }
plain_median=$(median "${plain[@]}")
woven_median=$(median "${woven[@]}")
printf 'cpu time (user+sys of the whole build): plain %.2f s, woven %.2f s, ratio %.2f\n' \
  "$(median "${plain_cpu[@]}")" "$(median "${woven_cpu[@]}")" \
  "$(ratio_of "$(median "${woven_cpu[@]}")" "$(median "${plain_cpu[@]}")")"
printf 'RESULT build_time plain_s=%.2f woven_s=%.2f ratio=%.2f\n' "$plain_median" "$woven_median" \
  "$(ratio_of "$woven_median" "$plain_median")"
