/* The MPI side of bench/scaling.sh's "hello with wire-up": what examples/hello does (init,
 * an allreduce of 1024 floats holding the rank, a check of the sum, exit), so that the whole
 * job's wall time compares start-up and wire-up, not work.
 *   mpiexec.hydra -n 4 ./mpi_hello */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  float v[1024];
  for (int i = 0; i < 1024; ++i) v[i] = (float)rank;
  MPI_Allreduce(MPI_IN_PLACE, v, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const float expected = (float)size * (float)(size - 1) / 2.0f;
  int bad = 0;
  for (int i = 0; i < 1024; ++i) bad |= v[i] != expected;
  if (bad) fprintf(stderr, "rank %d: allreduce gave %g, expected %g\n", rank, v[0], expected);
  MPI_Finalize();
  return bad;
}
