/* MPI_Allreduce (float, sum) over the same sizes as examples/allreduce_perf, for bench/vs_mpi.sh.
 * Buffers are allocated and touched once; every size gets warm-up iterations; the time is the
 * slowest rank's mean. Output: CSV "size,time_us,algbw_GBps".
 *   mpirun -n 2 ./mpi_allreduce -b 1024 -e 16777216 -f 2 -n 20 -w 5 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  size_t lo = 8, hi = 16u << 20;
  double factor = 2;
  int iters = 20, warmup = 5, opt, rank;
  while ((opt = getopt(argc, argv, "b:e:f:n:w:")) != -1) {
    switch (opt) {
      case 'b': lo = strtoull(optarg, NULL, 10); break;
      case 'e': hi = strtoull(optarg, NULL, 10); break;
      case 'f': factor = atof(optarg); break;
      case 'n': iters = atoi(optarg); break;
      case 'w': warmup = atoi(optarg); break;
      default: fprintf(stderr, "usage: %s [-b min] [-e max] [-f factor] [-n iters] [-w warmup]\n", argv[0]); return 2;
    }
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t n = hi / sizeof(float) + 1;
  float* in = malloc(n * sizeof(float));
  float* out = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) { in[i] = (float)(i % 7); out[i] = 0; }
  if (rank == 0) printf("size,time_us,algbw_GBps\n");
  for (double sz = (double)(lo < 4 ? 4 : lo); sz <= (double)hi * 1.0000001; sz *= factor) {
    int count = (int)((size_t)sz / sizeof(float));
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double us = (MPI_Wtime() - t0) * 1e6 / iters, worst;
    MPI_Allreduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("%zu,%.2f,%.3f\n", (size_t)count * sizeof(float), worst, (double)count * sizeof(float) / worst / 1e3);
    fflush(stdout);
  }
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
