/* The fork+exec floor of bench/scaling.sh: start N copies of a program at once (fork, exec),
 * wait for all, exit non-zero if any failed. What any launcher must pay at least.
 *   spawn_floor N program [args...] */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: spawn_floor N program [args...]\n");
    return 2;
  }
  const int n = atoi(argv[1]);
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      perror("spawn_floor: fork");
      return 1;
    }
    if (pid == 0) {
      execv(argv[2], argv + 2);
      _exit(127);
    }
  }
  int failed = 0, status = 0;
  while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  return failed;
}
