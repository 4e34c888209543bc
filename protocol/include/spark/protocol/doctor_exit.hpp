// The exit statuses of `sparkrun doctor` (docs/doctor.md) and how its probe's verdict reaches
// it. The probe's status travels as a rank's exit status through sparkrun, whose own statuses
// 1 (sparkrun failed) and 2 (bad input) would read as "warnings" and "failures": so the probe
// says its verdict with statuses no launcher path produces, and doctor maps them back.
#pragma once

namespace spark::protocol::doctor_exit {

inline constexpr int ok = 0;             ///< every row ok or info
inline constexpr int warnings = 1;       ///< at least one WARN row, no FAIL row
inline constexpr int failures = 2;       ///< at least one FAIL row (or a rank failed)
inline constexpr int could_not_run = 3;  ///< bad options, no probe, the job did not start

inline constexpr int probe_warnings = 81;
inline constexpr int probe_failures = 82;

/// The probe's status for a verdict of `fails` FAIL rows and `warns` WARN rows.
constexpr int probe_status(int fails, int warns) {
  return fails > 0 ? probe_failures : warns > 0 ? probe_warnings : ok;
}

/// What doctor exits with once sparkrun (or the probe alone) exited with `status`.
constexpr int from_probe(int status) {
  switch (status) {
    case ok:
      return ok;
    case probe_warnings:
      return warnings;
    case probe_failures:
      return failures;
    default:
      return could_not_run;
  }
}

}  // namespace spark::protocol::doctor_exit
