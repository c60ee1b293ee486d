# shellcheck shell=bash
# Shared by scripts/test and scripts/demo (source it; it only defines things):
#   DLOCK_ROOT       the repository
#   DLOCK_BUILD_DIR  the CMake build directory: $DLOCK_BUILD_DIR if set (relative to the
#                    directory the script was started from), else build/ in the repository
#   DLOCK_JOBS       parallel build and test jobs: $DLOCK_JOBS if set, else 2
#   dlock_step TEXT, dlock_install_deps, dlock_configure [DIR [CMAKE_ARGS...]],
#   dlock_build [DIR [TARGETS...]] (DIR defaults to $DLOCK_BUILD_DIR)

DLOCK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DLOCK_BUILD_DIR="${DLOCK_BUILD_DIR:-$DLOCK_ROOT/build}"
case "$DLOCK_BUILD_DIR" in
  /*) ;;
  *) DLOCK_BUILD_DIR="$PWD/$DLOCK_BUILD_DIR" ;;
esac
DLOCK_JOBS="${DLOCK_JOBS:-2}"

# Prints a step header, so a long log shows where it is.
dlock_step() {
  printf '\n==> %s\n' "$*"
}

dlock_install_deps() {
  dlock_step "dependencies"
  "$DLOCK_ROOT/scripts/install-deps"
}

# Configures a build directory ($DLOCK_BUILD_DIR unless given) as RelWithDebInfo, with any
# further CMake arguments. A directory configured before keeps its generator (CMake refuses to
# switch); a new one uses Ninja when it is installed, else Unix Makefiles.
dlock_configure() {
  local dir="${1:-$DLOCK_BUILD_DIR}"
  shift $(($# > 0 ? 1 : 0))
  dlock_step "configure: $dir"
  local generator=()
  if [[ ! -f "$dir/CMakeCache.txt" ]]; then
    if command -v ninja >/dev/null 2>&1; then
      generator=(-G Ninja)
    else
      generator=(-G "Unix Makefiles")
    fi
  fi
  cmake -S "$DLOCK_ROOT" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
}

# Builds everything in a build directory ($DLOCK_BUILD_DIR unless given), or only the targets
# named after it.
dlock_build() {
  local dir="${1:-$DLOCK_BUILD_DIR}"
  shift $(($# > 0 ? 1 : 0))
  local targets=()
  if (($# > 0)); then targets=(--target "$@"); fi
  dlock_step "build: $dir -j$DLOCK_JOBS${targets[*]:+ ${targets[*]}}"
  cmake --build "$dir" -j "$DLOCK_JOBS" "${targets[@]}"
}
