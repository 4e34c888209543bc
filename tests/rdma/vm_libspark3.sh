# Runs inside the VM (vm_run.sh): libspark's collective correctness suite with 3 ranks on the
# RoCE transport (see vm_libspark.sh).
set -u
export SPARK_TEST_ROCE=1
export SPARK_LANES=rxe0
echo "=== collectives_roce_3"
t0=$(date +%s)
libspark_collectives_test --gtest_filter='*roce_3ranks*' --gtest_brief=1 || { echo "=== collectives_roce_3: FAIL"; exit 1; }
echo "=== collectives_roce_3: PASS ($(( $(date +%s) - t0 )) s)"
