/* Test rank: prints what a rank knows about its binding, one line:
 *   rank R pmix_cpuset C locality L spark_cpuset S allowed A
 * C / L are PMIx's PMIX_CPUSET / PMIX_LOCALITY_STRING for this process ("?" when absent),
 * S is SPARK_CPUSET ("?" when unset), A is Cpus_allowed_list from /proc/self/status. */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void get_str(const pmix_proc_t* me, const char* key, char* buf, size_t len) {
  pmix_value_t* v = NULL;
  snprintf(buf, len, "?");
  if (PMIx_Get(me, key, NULL, 0, &v) == PMIX_SUCCESS && v && v->type == PMIX_STRING &&
      v->data.string && v->data.string[0]) {
    snprintf(buf, len, "%s", v->data.string);
  }
  if (v) PMIX_VALUE_RELEASE(v);
}

int main(void) {
  pmix_proc_t me;
  if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS) {
    fprintf(stderr, "PMIx_Init failed\n");
    return 10;
  }
  char cpuset[256], locality[512], allowed[256] = "?";
  get_str(&me, PMIX_CPUSET, cpuset, sizeof cpuset);
  get_str(&me, PMIX_LOCALITY_STRING, locality, sizeof locality);
  FILE* status = fopen("/proc/self/status", "r");
  char line[512];
  while (status && fgets(line, sizeof line, status)) {
    if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
      char* v = line + 18;
      while (*v == ' ' || *v == '\t') ++v;
      v[strcspn(v, "\n")] = 0;
      snprintf(allowed, sizeof allowed, "%s", v);
    }
  }
  if (status) fclose(status);
  const char* env = getenv("SPARK_CPUSET");
  printf("rank %u pmix_cpuset %s locality %s spark_cpuset %s allowed %s\n", me.rank, cpuset,
         locality, env && *env ? env : "?", allowed);
  PMIx_Finalize(NULL, 0);
  return 0;
}
