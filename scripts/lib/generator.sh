# Sourced by scripts/build and scripts/variant: the CMake generator of a build folder.
# Ninja when it is installed (scripts/deps installs ninja-build): it schedules the whole graph
# at once, where Make builds the targets named on one command line one after another; a
# folder already configured keeps its generator (CMake refuses to switch one in place).
spark_generator_args() {  # usage: args=($(spark_generator_args DIR))
  local cache=$1/CMakeCache.txt
  if [[ -f $cache ]]; then
    local gen
    gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$cache")
    [[ -n $gen ]] && { printf '%s\n' -G "$gen"; return; }
  fi
  if command -v ninja >/dev/null; then printf '%s\n' -G Ninja; fi
}
