#!/usr/bin/env bash
# The orphan watcher's fork() fallback: under a filter that refuses clone(CLONE_VM) the way
# qemu-user does, sparkrun still runs jobs, says (with -v) that its watcher is a fork, and the
# watcher still kills the ranks' groups and removes the job dir when sparkrun is SIGKILLed
# (the integration tests named below, run under the same filter).
#   fork_fallback.sh NO_CLONE_VM SPARKRUN INTEGRATION_TESTS
set -u
no_clone_vm=$1 sparkrun=$2 tests=$3
out=$("$no_clone_vm" "$sparkrun" -v -n 2 /bin/true 2>&1)
rc=$?
[[ $rc -eq 77 ]] && { echo "$out"; exit 77; }
echo "$out"
[[ $rc -eq 0 ]] || { echo "FAIL: sparkrun under no_clone_vm exited $rc"; exit 1; }
grep -q 'orphan watcher started (fork' <<<"$out" \
  || { echo "FAIL: sparkrun -v does not report the fork() watcher"; exit 1; }
"$no_clone_vm" "$tests" --gtest_filter='LauncherJob.NoHelperOutlivesSparkrun:LauncherJob.SigkillToSparkrunLeavesNoProcess:LauncherJob.SigtermToSparkrunStopsTheJob:LauncherJob.TimeoutExits124' \
  || { echo "FAIL: the orphan-watcher tests fail with the fork() watcher"; exit 1; }
echo PASS
