/* MPI_Allreduce (float, sum) over the same sizes as examples/allreduce_perf, for bench/vs_mpi.sh.
 * Buffers are allocated and touched once; every size gets warm-up iterations; the time is the
 * slowest rank's mean. Output: CSV "size,time_us,algbw_GBps,coll_us,own_us".
 * -W US -J JITTER: the work-step pattern of allreduce_perf --work US:JITTER (the same draws per
 * rank): time_us is the whole step, coll_us and algbw the collective's own share, own_us the
 * call's time after the last rank entered it (its cost without the wait for the slowest rank's
 * work; the entry times are compared across ranks, so only when all are on one node: else nan).
 *   mpirun -n 2 ./mpi_allreduce -b 1024 -e 16777216 -f 2 -n 20 -w 5 [-W 200 -J 50] */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* xorshift64, as in examples/allreduce_perf: a uniform draw in [0, 1). */
static double next_unit(uint64_t* x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return (double)(*x >> 11) / 9007199254740992.0;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Computation for `us` microseconds (a dependent chain of multiplies). */
static volatile double sink;
static void compute_for(double us) {
  double until = now_us() + us, x = 1.0;
  do {
    for (int i = 0; i < 64; ++i) x = x * 1.0000001 + 1e-9;
  } while (now_us() < until);
  sink = x;
}

int main(int argc, char** argv) {
  size_t lo = 8, hi = 16u << 20;
  double factor = 2, work = 0, jitter = -1;
  int iters = 20, warmup = 5, opt, rank;
  while ((opt = getopt(argc, argv, "b:e:f:n:w:W:J:")) != -1) {
    switch (opt) {
      case 'b':
        lo = strtoull(optarg, NULL, 10);
        break;
      case 'e':
        hi = strtoull(optarg, NULL, 10);
        break;
      case 'f':
        factor = atof(optarg);
        break;
      case 'n':
        iters = atoi(optarg);
        break;
      case 'w':
        warmup = atoi(optarg);
        break;
      case 'W':
        work = atof(optarg);
        break;
      case 'J':
        jitter = atof(optarg);
        break;
      default:
        fprintf(stderr,
                "usage: %s [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-W work_us -J "
                "jitter_us]\n",
                argv[0]);
        return 2;
    }
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t n = hi / sizeof(float) + 1;
  float* in = malloc(n * sizeof(float));
  float* out = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    in[i] = (float)(i % 7);
    out[i] = 0;
  }
  if (jitter < 0) jitter = work / 4;
  double* steps = malloc((size_t)iters * sizeof(double));
  uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
  for (int i = 0; i < iters; ++i) steps[i] = work + jitter * (2 * next_unit(&rng) - 1);
  /* The ranks' clocks are comparable (one CLOCK_MONOTONIC) only when they share a node. */
  MPI_Comm node;
  int size, node_size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  double* entered = malloc((size_t)iters * sizeof(double));
  double* left = malloc((size_t)iters * sizeof(double));
  if (rank == 0) printf("size,time_us,algbw_GBps,coll_us,own_us\n");
  for (double sz = (double)(lo < 4 ? 4 : lo); sz <= (double)hi * 1.0000001; sz *= factor) {
    int count = (int)((size_t)sz / sizeof(float));
    for (int i = 0; i < warmup; ++i)
      MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), coll = 0;
    for (int i = 0; i < iters; ++i) {
      if (work > 0) {
        compute_for(steps[i]);
        double c0 = now_us();
        MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double c1 = now_us();
        coll += c1 - c0;
        entered[i] = c0;
        left[i] = c1;
      } else {
        MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
    }
    double us = (MPI_Wtime() - t0) * 1e6 / iters, worst, worst_coll, own, worst_own;
    coll = work > 0 ? coll / iters : us;
    if (work > 0) {
      /* own: from the last rank's entry to this rank's exit, per iteration. */
      MPI_Allreduce(MPI_IN_PLACE, entered, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      own = 0;
      for (int i = 0; i < iters; ++i) own += left[i] - entered[i];
      own = node_size == size ? own / iters : NAN;
    } else {
      own = us;
    }
    MPI_Allreduce(&own, &worst_own, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&coll, &worst_coll, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
      printf("%zu,%.2f,%.3f,%.2f,%.2f\n", (size_t)count * sizeof(float), worst,
             (double)count * sizeof(float) / worst_coll / 1e3, worst_coll, worst_own);
    fflush(stdout);
  }
  free(steps);
  free(entered);
  free(left);
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
