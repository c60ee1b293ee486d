# shellcheck shell=bash
# Shared by scripts/test and scripts/demo (source it; it only defines things):
#   DLOCK_ROOT       the repository
#   DLOCK_BUILD_DIR  the CMake build directory: $DLOCK_BUILD_DIR if set (relative to the
#                    directory the script was started from), else build/ in the repository
#   DLOCK_JOBS       parallel build and test jobs: $DLOCK_JOBS if set, else 2
#   dlock_step TEXT, dlock_install_deps, dlock_configure, dlock_build

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

# Configures the build directory. A directory configured before keeps its generator (CMake
# refuses to switch); a new one uses Ninja when it is installed, else Unix Makefiles.
dlock_configure() {
  dlock_step "configure: $DLOCK_BUILD_DIR"
  local generator=()
  if [[ ! -f "$DLOCK_BUILD_DIR/CMakeCache.txt" ]]; then
    if command -v ninja >/dev/null 2>&1; then
      generator=(-G Ninja)
    else
      generator=(-G "Unix Makefiles")
    fi
  fi
  cmake -S "$DLOCK_ROOT" -B "$DLOCK_BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
}

dlock_build() {
  dlock_step "build: -j$DLOCK_JOBS"
  cmake --build "$DLOCK_BUILD_DIR" -j "$DLOCK_JOBS"
}
