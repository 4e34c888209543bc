// Yama and cross-memory attach: where kernel.yama.ptrace_scope is 1 (Ubuntu's default), a
// process may read another's memory (process_vm_readv/writev, the single-copy allreduce) only
// if it is the other's ancestor, or a descendant of the tracer the other declared with
// prctl(PR_SET_PTRACER, pid) (security/yama/yama_lsm.c: yama_ptrace_access_check under
// PTRACE_MODE_ATTACH, ptracer_exception_found -> task_is_descendant(declared, reader)). Sibling
// ranks are neither, so the single copy would be off. Each rank declares its parent (the
// launcher that started the node's ranks: sparkrun, slurmstepd, the test harness): then
// exactly that parent's descendants, the job's ranks, may read it, not every process of the
// user (which PR_SET_PTRACER_ANY, Open MPI's choice, would allow). SPARK_SHM_PTRACER=off keeps
// the kernel's rule.
#pragma once

#include <optional>
#include <string>

namespace spark::transport {

/// What a rank does about Yama at start-up (shm transport creation).
struct PtracerPlan {
  bool declare = false;  ///< call prctl(PR_SET_PTRACER, tracer)
  int tracer = 0;        ///< the pid to declare (the rank's parent)
  std::string why;       ///< why (not), for SPARK_LOG=info:shm; empty when Yama is absent
};

/// The decision, from what was read: Yama's ptrace_scope (nullopt: no Yama), whether the rank
/// uses cross-memory attach at all (SPARK_SHM_CMA), SPARK_SHM_PTRACER (true: parent) and the
/// rank's parent pid (getppid()).
PtracerPlan plan_ptracer(std::optional<int> yama_scope, bool cross_memory, bool declare_parent,
                         int parent_pid);

/// /proc/sys/kernel/yama/ptrace_scope; nullopt when the file is absent or unreadable.
std::optional<int> read_yama_scope();

/// Reads Yama's scope, decides, and declares the tracer when the plan says so; logs what it
/// did at info:shm ("rank R: ..."). Returns the plan (its `why` says what happened).
PtracerPlan declare_ptracer_for_siblings(int rank, bool cross_memory, bool declare_parent);

}  // namespace spark::transport
