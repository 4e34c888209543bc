/* The device-buffer C API (spark.h): without CUDA every entry point fails with a clear
 * message; with CUDA but no GPU, create names the missing device; with a GPU, a device
 * communicator is made, takes a timeout, reports no failure and is destroyed. */
#include <spark/spark.h>
#include <stdio.h>
#include <string.h>

#define CHECK(cond)                                                                \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "c_api_device: %s failed: %s\n", #cond, spark_last_error()); \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

int main(void) {
  spark_comm* comm = NULL;
  spark_device_comm* dev = (spark_device_comm*)&comm; /* must be reset to NULL on failure */
  spark_failure_record record;
  CHECK(spark_init(&comm) == SPARK_OK);
  /* Bad arguments, in every build. */
  CHECK(spark_device_comm_create(NULL, 0, &dev) == SPARK_ERR_INVALID && dev == NULL);
  CHECK(strstr(spark_last_error(), "spark_device_comm_create: comm is NULL") != NULL);
  CHECK(spark_device_comm_create(comm, 0, NULL) == SPARK_ERR_INVALID);
  CHECK(spark_allreduce_device(NULL, NULL, NULL, 1, SPARK_F32, SPARK_SUM, NULL) ==
        SPARK_ERR_INVALID);
  CHECK(strstr(spark_last_error(), "spark_allreduce_device: dev is NULL") != NULL);
  CHECK(spark_device_failure(NULL, &record) == -1);
  CHECK(spark_device_set_timeout_ms(NULL, 5) == SPARK_ERR_INVALID);
  CHECK(spark_device_comm_destroy(NULL) == SPARK_OK);

  const int rc = spark_device_comm_create(comm, 0, &dev);
  if (!spark_built_with_cuda()) {
    CHECK(rc == SPARK_ERR_INVALID && dev == NULL);
    CHECK(strstr(spark_last_error(), "built without CUDA") != NULL);
    printf("c_api_device: ok (built without CUDA: %s)\n", spark_last_error());
  } else if (rc != SPARK_OK) {
    CHECK(rc == SPARK_ERR_INVALID && dev == NULL);
    CHECK(strstr(spark_last_error(), "no CUDA device") != NULL);
    printf("c_api_device: ok (no GPU: %s)\n", spark_last_error());
  } else {
    CHECK(dev != NULL);
    CHECK(spark_device_set_timeout_ms(dev, 1234) == SPARK_OK);
    CHECK(spark_timeout_ms(comm) == 1234);
    CHECK(spark_device_failure(dev, &record) == 0);
    CHECK(spark_allreduce_device(dev, NULL, NULL, 1, SPARK_F32, 99, NULL) == SPARK_ERR_INVALID);
    CHECK(spark_device_comm_destroy(dev) == SPARK_OK);
    printf("c_api_device: ok (GPU)\n");
  }
  CHECK(spark_finalize(comm) == SPARK_OK);
  return 0;
}
