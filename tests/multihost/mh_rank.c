/* Rank program for the multi-host tests: a PMIx client (pmix.h directly).
 *   mh_rank hello          identity line: rank, size, SPARK_HOST, PMIx hostname, local peers
 *   mh_rank modex          put "mh.key"=rank-N, fence(collect), get every rank's key
 *   mh_rank exit N RANK    RANK exits N after a fence; others wait in a second fence
 *   mh_rank abort S RANK   RANK calls PMIx_Abort(S, "mh_rank abort from rank R"); others sleep
 *   mh_rank sleep SECONDS  every rank sleeps (timeouts, kill tests)
 * Extra trailing arguments are ignored (tests add a unique marker to find processes). */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pmix_proc_t me;

static int get_str(pmix_rank_t rank, const char* key, char* buf, size_t len) {
  pmix_proc_t p;
  PMIX_LOAD_PROCID(&p, me.nspace, rank);
  pmix_value_t* v = NULL;
  int ok = 0;
  buf[0] = 0;
  if (PMIx_Get(&p, key, NULL, 0, &v) == PMIX_SUCCESS && v) {
    if (v->type == PMIX_STRING)
      snprintf(buf, len, "%s", v->data.string), ok = 1;
    else if (v->type == PMIX_UINT32)
      snprintf(buf, len, "%u", v->data.uint32), ok = 1;
    else if (v->type == PMIX_UINT16)
      snprintf(buf, len, "%u", v->data.uint16), ok = 1;
    PMIX_VALUE_RELEASE(v);
  }
  return ok;
}

static void fence(void) {
  pmix_info_t info;
  bool collect = true;
  PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  pmix_status_t rc = PMIx_Fence(NULL, 0, &info, 1);
  if (rc != PMIX_SUCCESS) {
    fprintf(stderr, "rank %u: PMIx_Fence failed: %s\n", me.rank, PMIx_Error_string(rc));
    exit(20);
  }
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = argc > 1 ? argv[1] : "hello";
  if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS) {
    fprintf(stderr, "PMIx_Init failed\n");
    return 10;
  }
  char size[32], host[256], peers[1024], lsize[32];
  get_str(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE, size, sizeof size);
  get_str(me.rank, PMIX_HOSTNAME, host, sizeof host);
  get_str(PMIX_RANK_WILDCARD, PMIX_LOCAL_PEERS, peers, sizeof peers);
  get_str(PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE, lsize, sizeof lsize);
  const char* spark_host = getenv("SPARK_HOST");
  if (strcmp(mode, "hello") == 0) {
    printf("hello rank %u size %s spark_host %s pmix_host %s local_peers %s local_size %s\n",
           me.rank, size, spark_host ? spark_host : "-", host, peers, lsize);
  } else if (strcmp(mode, "modex") == 0) {
    char val[64];
    snprintf(val, sizeof val, "rank-%u@%s", me.rank, spark_host ? spark_host : "-");
    pmix_value_t v;
    PMIX_VALUE_LOAD(&v, val, PMIX_STRING);
    PMIx_Put(PMIX_GLOBAL, "mh.key", &v);
    PMIX_VALUE_DESTRUCT(&v);
    PMIx_Commit();
    fence();
    unsigned n = (unsigned)atoi(size), ok = 0;
    for (unsigned r = 0; r < n; ++r) {
      char got[64], peer_host[256];
      get_str(r, PMIX_HOSTNAME, peer_host, sizeof peer_host);
      snprintf(val, sizeof val, "rank-%u@%s", r, peer_host);
      if (get_str(r, "mh.key", got, sizeof got) && strcmp(got, val) == 0)
        ++ok;
      else
        fprintf(stderr, "rank %u: key of rank %u: got '%s', want '%s'\n", me.rank, r, got, val);
    }
    printf("modex rank %u host %s ok %u/%u\n", me.rank, host, ok, n);
    fence();
    if (ok != n) return 3;
  } else if (strcmp(mode, "exit") == 0 && argc > 3) {
    fence();
    if ((int)me.rank == atoi(argv[3])) return atoi(argv[2]);
    fence(); /* waits for the failed rank: only the group abort ends it */
  } else if (strcmp(mode, "abort") == 0 && argc > 3) {
    if ((int)me.rank == atoi(argv[3])) {
      char msg[128];
      snprintf(msg, sizeof msg, "mh_rank abort from rank %u", me.rank);
      PMIx_Abort(atoi(argv[2]), msg, NULL, 0);
    }
    sleep(60);
  } else if (strcmp(mode, "sleep") == 0 && argc > 2) {
    for (int i = 0; i < atoi(argv[2]) * 10; ++i) usleep(100000);
  }
  PMIx_Finalize(NULL, 0);
  return 0;
}
