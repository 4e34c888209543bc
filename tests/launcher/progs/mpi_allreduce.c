/* Open MPI direct-launch test: MPI_Init, MPI_Allreduce of the ranks, MPI_Finalize.
 * Prints "mpi rank=R size=S sum=X ok" when the sum is right, exits 1 otherwise. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  long expected = (long)size * (size + 1) / 2;
  printf("mpi rank=%d size=%d sum=%ld %s\n", rank, size, sum, sum == expected ? "ok" : "WRONG");
  fflush(stdout);
  MPI_Finalize();
  return sum == expected ? 0 : 1;
}
