// Runs a command the way qemu-user runs programs: clone() with CLONE_VM but without
// CLONE_THREAD (or CLONE_VFORK) fails with EINVAL, clone3 with ENOSYS (glibc then uses
// clone). A seccomp filter does it, inherited by every process the command starts.
//   no_clone_vm PROGRAM [ARG...]     exit 77 when this kernel refuses the filter
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define SPARK_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SPARK_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "no_clone_vm: add this architecture's AUDIT_ARCH"
#endif

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: no_clone_vm PROGRAM [ARG...]\n");
    return 2;
  }
  // clone's flags are its first argument on x86_64 and aarch64; their low 32 bits suffice.
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SPARK_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, CLONE_VM | CLONE_THREAD | CLONE_VFORK),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CLONE_VM, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof filter / sizeof filter[0], filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    fprintf(stderr, "no_clone_vm: SKIP: this kernel refuses a seccomp filter: %s\n",
            strerror(errno));
    return 77;
  }
  execvp(argv[1], argv + 1);
  fprintf(stderr, "no_clone_vm: %s: %s\n", argv[1], strerror(errno));
  return 127;
}
