# Runs inside the VM (vm_run.sh): libspark's own collective correctness suite with 2 and 3
# ranks (every collective x dtype x op x size, bit-exact, all on rxe0) and its fail-stop tests
# (3 ranks: killed peer, SIGSTOPped peer, mismatches, skewed start) on the RoCE transport.
# SPARK_TEST_ROCE adds "roce" to their transport list; the rendezvous runs over the VM's
# loopback, the data over rxe0. One boot for all three: the boot is a fifth of the time.
set -u
. /vm_lib.sh
export SPARK_TEST_ROCE=1
export SPARK_LANES=rxe0
# TCG on a shared host: the fault tests' lateness and CPU bounds take their emulation values
# (tests/libspark/multiproc.hpp, emulated()).
export SPARK_TEST_EMULATED=1
gtest collectives_roce_2 libspark_collectives_test '*roce_2ranks*' --gtest_brief=1
gtest collectives_roce_3 libspark_collectives_test '*roce_3ranks*' --gtest_brief=1
gtest fault_roce libspark_fault_test '*roce*' --gtest_brief=1
exit $failed
