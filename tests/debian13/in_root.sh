#!/usr/bin/env bash
# Runs one part of the Debian 13 build's tests inside the root (tests/debian13/CMakeLists.txt):
#   in_root.sh unit|integration|fault   that label's tests of ${SPARK_BUILD_DIR:-build}/debian13
#   in_root.sh python                   the python label there: the package and the torch 2.x
#                                       backend against the root's torch (label torch2 here)
#   in_root.sh openmpi5                 an Open MPI 5 program direct-launched by sparkrun
#   in_root.sh deps                     scripts/deps's Debian 13 names resolve in the root
# Exit 77 when there is no root or no build in it (the fixtures skipped: the reason is theirs).
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${SPARK_BUILD_DIR:-build}
[[ $build == /* ]] || build=$src/$build
dir=$build/debian13
what=${1:?usage: in_root.sh unit|integration|fault|python|openmpi5|deps}
in_root=("$src/scripts/in-debian13" --root "$build/debian13-root")
if [[ $what == deps ]]; then
  # A release it does not know: it says so and installs nothing (exit 1).
  out=$("$src/scripts/deps" --release plan9:4 2>&1)
  rc=$?
  [[ $rc == 1 && $out == *"knows Debian 12, Debian 13 and Ubuntu 24.04"* ]] ||
    { echo "$out"; echo "FAIL: scripts/deps on an unknown release: exit $rc"; exit 1; }
  # Every name of --test, resolved by the root's apt (its lists are from the root's making);
  # --dry-run: the shared root is not changed.
  exec "${in_root[@]}" scripts/deps --test --dry-run
fi
[[ -f $dir/CTestTestfile.cmake && -x $dir/launcher/sparkrun ]] ||
  { echo "SKIP: no Debian 13 build in $dir (scripts/debian13-build)"; exit 77; }

case $what in
  unit | integration | fault | python)
    # install: cmake --install needs every target, and this build has only the tests' ones.
    # --no-tests=error: a selection that matches nothing (a renamed label) fails, not passes.
    # multihost: network namespaces are the host's (the root runs in a private mount ns);
    # observability's stack cases: the root has neither eu-stack nor gdb (they run on the host).
    exec "${in_root[@]}" ctest --test-dir "$dir" -L "^$what\$" -LE '^multihost$' \
      -E '^install\.|_NOT_BUILT$|^observability\.(status_recorder_stacks|python_stacks)$' \
      --no-tests=error --output-on-failure --timeout 600 -j2
    ;;
  openmpi5)
    # Versions first: this test means PMIx 5 and Open MPI 5; a root with others is no such test.
    exec "${in_root[@]}" bash -c '
      set -u
      prog=$1/tests/launcher/launcher_mpi_allreduce sparkrun=$1/launcher/sparkrun
      pmix=$(pkg-config --modversion pmix) ompi=$(mpirun.openmpi --version 2>&1 | sed -n "s/.*(Open MPI) //p")
      echo "OpenPMIx $pmix, Open MPI $ompi"
      case $pmix:$ompi in 5.*:5.*) ;; *) echo "FAIL: expected OpenPMIx 5 and Open MPI 5"; exit 1 ;; esac
      [ -x "$prog" ] || { echo "FAIL: $prog not built (mpicc.openmpi missing in the root?)"; exit 1; }
      # A /dev/shm of its own (a mount namespace inside the root): what the job leaves there is
      # its own, whatever runs beside it. Open MPI 5 asks PMIx to remove its 16 MiB segments.
      out=$(unshare --mount --propagation unchanged sh -c "mount -t tmpfs -o size=512m tmpfs /dev/shm &&
        timeout 120 \"\$0\" -n 3 --timeout 100 \"\$1\" && ls -A /dev/shm | sed \"s/^/left in \/dev\/shm: /\"" \
        "$sparkrun" "$prog" 2>&1); rc=$?
      echo "$out"
      [ $rc = 0 ] || { echo "FAIL: sparkrun -n 3 $prog: exit $rc"; exit 1; }
      for r in 0 1 2; do
        echo "$out" | grep -qx "mpi rank=$r size=3 sum=6 ok" || { echo "FAIL: no line of rank $r"; exit 1; }
      done
      if echo "$out" | grep -q "^left in /dev/shm: "; then echo "FAIL: the job left files in /dev/shm"; exit 1; fi
      echo "PASS: openmpi5: 3 Open MPI $ompi ranks joined one job under sparkrun'"'"'s OpenPMIx $pmix server, nothing left in /dev/shm"
    ' openmpi5 "$dir"
    ;;
  *) echo "in_root.sh: unknown part '$what'" >&2; exit 2 ;;
esac
