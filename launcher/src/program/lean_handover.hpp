// Two executables, one sparkrun (docs/launcher.md, "Lean launcher"): `sparkrun` is built
// without the multi-host control plane (Asio, OpenSSL), `sparkrun doctor` (libibverbs,
// libnl, libudev) and --print-config (libspark's knob table, libfmt), whose loading and
// relocation cost ~3 ms on every launch although a one-host job never uses them. `sparkrun-full`,
// installed next to it, is the complete program; the lean one hands a command line over to it
// (execv, same pid, same argv and environment) before starting anything when it may need those
// parts.
#pragma once

#include "options.hpp"

namespace spark::launch {

/// In the lean `sparkrun`: execs `sparkrun-full` (same directory) with this process's argv
/// when the parsed options may need a part the lean build leaves out: a host list
/// (--host/-H/--hostfile/--machinefile), a launch agent or control network, or a SLURM
/// allocation in the environment (SLURM_JOB_ID / SLURM_JOBID). Node daemon mode, `sparkrun
/// doctor` and --print-config reach the stand-ins, which hand over too. Returns only when no
/// hand-over is needed; if the exec fails, prints why and exits 1. In `sparkrun-full`: nothing.
void hand_over_if_needed(const Options& o);

/// Execs `sparkrun-full` with this process's original argv (/proc/self/cmdline); used by
/// the lean build's stand-ins for the parts it leaves out. Never returns (exit 1 on failure).
[[noreturn]] void hand_over_to_full();

}  // namespace spark::launch
