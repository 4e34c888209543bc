/* Test rank for sparkrun's integration tests: a PMIx client using pmix.h directly.
 *   pmix_client hello            print identity (PMIx and SPARK_* env) and exit 0
 *   pmix_client modex            put/commit/fence(collect)/get across every rank
 *   pmix_client exit N [RANK]    exit N on rank RANK (default 1); others sleep
 *   pmix_client kill9 [RANK]     RANK raises SIGKILL; others sleep
 *   pmix_client abort S MSG [RANK]  RANK calls PMIx_Abort(S, MSG); others sleep
 *   pmix_client abort-in-fence S RANK  RANK calls PMIx_Abort(S); others wait in PMIx_Fence
 *   pmix_client sleep SECONDS    every rank sleeps (for --timeout and SIGKILL tests)
 *   pmix_client spawn-sleep SECONDS  fork a child that sleeps, then sleep too
 * Extra trailing arguments are ignored (tests put a job-unique marker there). */
#include <pmix.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pmix_proc_t me;

static unsigned get_u32(const char* key, pmix_rank_t rank) {
  pmix_proc_t p;
  PMIX_LOAD_PROCID(&p, me.nspace, rank);
  pmix_value_t* v = NULL;
  if (PMIx_Get(&p, key, NULL, 0, &v) != PMIX_SUCCESS || v == NULL) return 999999;
  unsigned out = 0;
  if (v->type == PMIX_UINT32)
    out = v->data.uint32;
  else if (v->type == PMIX_UINT16)
    out = v->data.uint16;
  else if (v->type == PMIX_PROC_RANK)
    out = v->data.rank;
  PMIX_VALUE_RELEASE(v);
  return out;
}

static void get_str(const char* key, pmix_rank_t rank, char* buf, size_t len) {
  pmix_proc_t p;
  PMIX_LOAD_PROCID(&p, me.nspace, rank);
  pmix_value_t* v = NULL;
  snprintf(buf, len, "?");
  if (PMIx_Get(&p, key, NULL, 0, &v) == PMIX_SUCCESS && v && v->type == PMIX_STRING) {
    snprintf(buf, len, "%s", v->data.string);
  }
  if (v) PMIX_VALUE_RELEASE(v);
}

static void idle(int seconds) {
  for (int i = 0; i < seconds * 10; ++i) usleep(100000);
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = argc > 1 ? argv[1] : "hello";
  if (strcmp(mode, "child-sleep") == 0 && argc > 2) {
    idle(atoi(argv[2])); /* a rank's child: sleeps without PMIx */
    return 0;
  }
  pmix_status_t rc = PMIx_Init(&me, NULL, 0);
  if (rc != PMIX_SUCCESS) {
    fprintf(stderr, "PMIx_Init failed: %s\n", PMIx_Error_string(rc));
    return 10;
  }
  pmix_rank_t wildcard = PMIX_RANK_WILDCARD;
  unsigned size = get_u32(PMIX_JOB_SIZE, wildcard);
  const char* env_rank = getenv("SPARK_RANK");

  if (strcmp(mode, "hello") == 0) {
    char host[256];
    get_str(PMIX_HOSTNAME, me.rank, host, sizeof host);
    printf(
        "hello rank=%u size=%u local_rank=%u local_size=%u node_rank=%u host=%s "
        "univ=%u appnum=%u spark_rank=%s spark_size=%s spark_local_rank=%s "
        "spark_local_size=%s spark_node_rank=%s spark_host=%s job=%s\n",
        me.rank, size, get_u32(PMIX_LOCAL_RANK, me.rank), get_u32(PMIX_LOCAL_SIZE, wildcard),
        get_u32(PMIX_NODE_RANK, me.rank), host, get_u32(PMIX_UNIV_SIZE, wildcard),
        get_u32(PMIX_APPNUM, me.rank), env_rank ? env_rank : "-",
        getenv("SPARK_SIZE") ? getenv("SPARK_SIZE") : "-",
        getenv("SPARK_LOCAL_RANK") ? getenv("SPARK_LOCAL_RANK") : "-",
        getenv("SPARK_LOCAL_SIZE") ? getenv("SPARK_LOCAL_SIZE") : "-",
        getenv("SPARK_NODE_RANK") ? getenv("SPARK_NODE_RANK") : "-",
        getenv("SPARK_HOST") ? getenv("SPARK_HOST") : "-",
        getenv("SPARK_JOB_ID") ? getenv("SPARK_JOB_ID") : "-");
  } else if (strcmp(mode, "modex") == 0) {
    char key[64], val[64];
    snprintf(val, sizeof val, "value-from-%u", me.rank);
    pmix_value_t v;
    PMIX_VALUE_LOAD(&v, val, PMIX_STRING);
    if (PMIx_Put(PMIX_GLOBAL, "test.key", &v) != PMIX_SUCCESS) return 11;
    PMIX_VALUE_DESTRUCT(&v);
    if (PMIx_Commit() != PMIX_SUCCESS) return 12;
    pmix_info_t info;
    bool collect = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    pmix_proc_t all;
    PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Fence(&all, 1, &info, 1);
    if (rc != PMIX_SUCCESS) {
      fprintf(stderr, "fence failed: %s\n", PMIx_Error_string(rc));
      return 13;
    }
    int ok = 0;
    for (unsigned r = 0; r < size; ++r) {
      pmix_proc_t p;
      PMIX_LOAD_PROCID(&p, me.nspace, r);
      pmix_value_t* got = NULL;
      snprintf(key, sizeof key, "value-from-%u", r);
      if (PMIx_Get(&p, "test.key", NULL, 0, &got) == PMIX_SUCCESS && got &&
          got->type == PMIX_STRING && strcmp(got->data.string, key) == 0) {
        ++ok;
      } else {
        fprintf(stderr, "rank %u: bad value from rank %u\n", me.rank, r);
      }
      if (got) PMIX_VALUE_RELEASE(got);
    }
    printf("modex rank=%u ok=%d/%u\n", me.rank, ok, size);
    if ((unsigned)ok != size) return 14;
  } else if (strcmp(mode, "exit") == 0 && argc > 2) {
    unsigned who = argc > 3 ? (unsigned)atoi(argv[3]) : 1;
    if (me.rank == who) {
      printf("rank %u exits %s\n", me.rank, argv[2]);
      exit(atoi(argv[2]));
    }
    idle(60);
  } else if (strcmp(mode, "kill9") == 0) {
    unsigned who = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
    if (me.rank == who) raise(SIGKILL);
    idle(60);
  } else if (strcmp(mode, "abort") == 0 && argc > 3) {
    unsigned who = argc > 4 ? (unsigned)atoi(argv[4]) : 1;
    if (me.rank == who) {
      PMIx_Abort(atoi(argv[2]), argv[3], NULL, 0);
      return 99; /* not reached when the launcher kills us */
    }
    idle(60);
  } else if (strcmp(mode, "abort-in-fence") == 0 && argc > 3) {
    if (me.rank == (unsigned)atoi(argv[3])) {
      PMIx_Abort(atoi(argv[2]), "abort while the others wait in a fence", NULL, 0);
      return 99; /* not reached when the launcher kills us */
    }
    pmix_proc_t all;
    PMIX_PROC_CONSTRUCT(&all);
    PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
    PMIx_Fence(&all, 1, NULL, 0); /* never completes: the aborting rank does not join */
    idle(60);
  } else if (strcmp(mode, "child-sleep") == 0 && argc > 2) {
    idle(atoi(argv[2])); /* a rank's child: sleeps without PMIx */
  } else if (strcmp(mode, "sleep") == 0 && argc > 2) {
    printf("rank %u sleeping\n", me.rank);
    idle(atoi(argv[2]));
  } else if (strcmp(mode, "spawn-sleep") == 0 && argc > 2) {
    pid_t pid = fork();
    if (pid == 0) {
      /* The grandchild keeps the job's marker in its argv (exec of itself). */
      char* child_argv[] = {argv[0], "child-sleep", argv[2], argc > 3 ? argv[3] : NULL, NULL};
      execv("/proc/self/exe", child_argv);
      _exit(1);
    }
    printf("rank %u sleeping with child %d\n", me.rank, (int)pid);
    idle(atoi(argv[2]));
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    PMIx_Finalize(NULL, 0);
    return 2;
  }
  PMIx_Finalize(NULL, 0);
  return 0;
}
