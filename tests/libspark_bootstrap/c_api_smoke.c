/* spark.h compiles as C and links against libspark: init (one rank), allreduce, failure,
 * finalize. */
#include <spark/spark.h>
#include <stdio.h>
#include <string.h>

#define CHECK(cond)                                                               \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "c_api_smoke: %s failed: %s\n", #cond, spark_last_error()); \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

int main(void) {
  spark_comm* comm = NULL;
  double in[3] = {1.0, 2.0, 4.0};
  double out[3] = {0};
  spark_failure_record record;
  char line[256];
  CHECK(spark_init(&comm) == SPARK_OK && comm != NULL);
  CHECK(spark_size(comm) == 1 && spark_rank(comm) == 0);
  CHECK(spark_allreduce(comm, in, out, 3, SPARK_F64, SPARK_MAX) == SPARK_OK);
  CHECK(out[0] == 1.0 && out[1] == 2.0 && out[2] == 4.0);
  CHECK(spark_barrier(comm) == SPARK_OK);
  CHECK(spark_failure(comm, &record) == 0);
  CHECK(spark_allreduce(comm, in, out, 3, SPARK_F64, 99) == SPARK_ERR_INVALID);
  CHECK(strstr(spark_last_error(), "op 99 is not a spark_reduce_op") != NULL);
  memset(&record, 0, sizeof record);
  record.peer = 1;
  record.cause = SPARK_CAUSE_PEER_CLOSED;
  strcpy(record.op, "barrier");
  CHECK(spark_format_failure(&record, line, sizeof line) > 0);
  CHECK(strcmp(line, "rank 0: barrier seq 0 step 0: rank 1 closed its connection after 0 ms") == 0);
  CHECK(spark_failure_record_size() == sizeof(spark_failure_record));
  { /* sub-communicators: a split, a negative color, a dup, each usable and freed */
    spark_comm* sub = NULL;
    spark_comm* none = (spark_comm*)1;
    spark_comm* dup = NULL;
    CHECK(spark_comm_split(comm, 3, 0, &sub) == SPARK_OK && sub != NULL);
    CHECK(spark_size(sub) == 1 && spark_rank(sub) == 0);
    CHECK(spark_allreduce(sub, in, out, 3, SPARK_F64, SPARK_SUM) == SPARK_OK && out[2] == 4.0);
    CHECK(spark_comm_split(comm, -1, 0, &none) == SPARK_OK && none == NULL);
    CHECK(spark_comm_dup(sub, &dup) == SPARK_OK && dup != NULL && spark_size(dup) == 1);
    CHECK(spark_comm_split(comm, 0, 0, NULL) == SPARK_ERR_INVALID);
    CHECK(spark_comm_free(dup) == SPARK_OK && spark_comm_free(sub) == SPARK_OK);
  }
  CHECK(spark_finalize(comm) == SPARK_OK);
  printf("c_api_smoke: ok\n");
  return 0;
}
