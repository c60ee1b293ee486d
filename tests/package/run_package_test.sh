#!/usr/bin/env bash
# Installs dlock from a build tree into a scratch prefix, then builds tests/package/sample
# with find_package(dlock) and dlock_weave() under each CMake generator, runs it against a
# real redis-server, and checks what an incremental build re-runs.
#
#   run_package_test.sh DLOCK_BUILD_DIR SAMPLE_DIR REDIS_SERVER
set -euo pipefail
build_dir=$1 sample=$2 redis_server=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-package.XXXXXX")
redis_pid=""
cleanup() {
  if [[ -n "$redis_pid" ]]; then kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build_dir" --prefix "$work/prefix" >"$work/install.log" || fail "install (see $work/install.log)"

# A throw-away server on a free loopback port.
for attempt in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 30000))
  "$redis_server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
    --logfile "$work/redis.log" &
  redis_pid=$!
  for _ in $(seq 50); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break 2; fi
    kill -0 "$redis_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; redis_pid=""
done
[[ -n "$redis_pid" ]] || fail "could not start redis-server"
printf 'service: package-test\nbackends:\n  default: { topology: single, address: redis://127.0.0.1:%s }\n' \
  "$port" >"$work/dlock.yaml"

check_generator() {
  local generator=$1 dir=$2
  cp -r "$sample" "$dir"
  cmake -S "$dir" -B "$dir/build" -G "$generator" -DCMAKE_PREFIX_PATH="$work/prefix" >"$dir/configure.log" ||
    fail "$generator: configure (see $dir/configure.log)"
  cmake --build "$dir/build" -j 2 >"$dir/build1.log" 2>&1 || { cat "$dir/build1.log"; fail "$generator: build"; }
  local woven
  woven=$(grep -c "Weaving" "$dir/build1.log" || true)
  [[ "$woven" == 3 ]] || fail "$generator: first build wove $woven sources, expected 3"

  DLOCK_CONFIG="$work/dlock.yaml" "$dir/build/inventory" >"$dir/run.log" || { cat "$dir/run.log"; fail "$generator: the program failed"; }
  grep -q "key=stock:sku-1 token>0=1 other-client-refused=1" "$dir/run.log" ||
    { cat "$dir/run.log"; fail "$generator: the guard did not hold a real lock"; }
  # Guards defined in shelf.hpp, woven in the copies that report.cpp and main.cpp include.
  grep -q "restock x2: key=shelf:north token>0=1 other-client-refused=1" "$dir/run.log" ||
    { cat "$dir/run.log"; fail "$generator: the in-class guard of shelf.hpp did not hold a real lock"; }
  grep -q "count_bin x3: key=bin:7 token>0=1 other-client-refused=1" "$dir/run.log" &&
    grep -q "count_bin x1: key=bin:8 token>0=1 other-client-refused=1" "$dir/run.log" ||
    { cat "$dir/run.log"; fail "$generator: the template guard of shelf.hpp did not hold a real lock"; }

  cmake --build "$dir/build" -j 2 >"$dir/build2.log" 2>&1
  if grep -qE "Weaving|Building|Linking" "$dir/build2.log"; then
    cat "$dir/build2.log"; fail "$generator: a build with nothing touched re-ran something"
  fi

  sleep 1  # make the next modification time visibly newer
  touch "$dir/include/report.hpp"
  cmake --build "$dir/build" -j 2 >"$dir/build3.log" 2>&1
  grep -q "Weaving report.cpp" "$dir/build3.log" || { cat "$dir/build3.log"; fail "$generator: touching report.hpp did not re-weave report.cpp"; }
  grep -q "Weaving main.cpp" "$dir/build3.log" || { cat "$dir/build3.log"; fail "$generator: touching report.hpp did not re-weave main.cpp"; }
  if grep -q "Weaving stock.cpp" "$dir/build3.log"; then
    cat "$dir/build3.log"; fail "$generator: stock.cpp does not include report.hpp but was re-woven"
  fi

  sleep 1
  touch "$dir/include/shelf.hpp"
  cmake --build "$dir/build" -j 2 >"$dir/build4.log" 2>&1
  grep -q "Weaving report.cpp" "$dir/build4.log" && grep -q "Weaving main.cpp" "$dir/build4.log" ||
    { cat "$dir/build4.log"; fail "$generator: touching shelf.hpp did not re-weave main.cpp and report.cpp"; }
  if grep -q "Weaving stock.cpp" "$dir/build4.log"; then
    cat "$dir/build4.log"; fail "$generator: stock.cpp does not include shelf.hpp but was re-woven"
  fi

  # A target that includes shelf.hpp without weaving must not build.
  cmake -S "$dir" -B "$dir/build-tool" -G "$generator" -DCMAKE_PREFIX_PATH="$work/prefix" \
    -DSAMPLE_UNWOVEN_TOOL=ON >"$dir/configure-tool.log" || fail "$generator: configure with tool"
  if cmake --build "$dir/build-tool" -j 2 --target tool >"$dir/build-tool.log" 2>&1; then
    cat "$dir/build-tool.log"; fail "$generator: an unwoven target compiled shelf.hpp's guards"
  fi
  grep -q "error: target 'tool' compiles this source without weaving it, and it includes '$dir/include/shelf.hpp'" \
    "$dir/build-tool.log" || { cat "$dir/build-tool.log"; fail "$generator: the unwoven target's error does not name it and shelf.hpp"; }
  echo "$generator: ok (3 sources woven, guards held real locks, no-op rebuild, header touches re-wove 2 of 3, unwoven target refused)"
}

check_generator "Unix Makefiles" "$work/make"
if command -v ninja >/dev/null 2>&1; then
  check_generator Ninja "$work/ninja"
else
  fail "ninja is not installed (scripts/install-deps installs ninja-build)"
fi
echo "1 passed, 0 failed"
