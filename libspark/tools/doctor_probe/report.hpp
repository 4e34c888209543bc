// What `sparkrun doctor` prints at the end, in every mode (host, job, bandwidth): the one-line
// cable summary a person reads first, and the one JSON document of `--json`
// (doctor-report.schema.json beside this file; docs/doctor.md).
#pragma once

#include <string>
#include <vector>

#include "bandwidth.hpp"
#include "host_checks.hpp"
#include "job_table.hpp"

namespace spark::doctor {

/// "host" (this host only), "job" (every rank), "bandwidth" (a job with --bandwidth).
struct ReportHead {
  std::string mode;
  int ranks = 0;  ///< 0 in host mode
};

/// One line per direction of each cable: verdict, rate and its share of the reference.
std::string cable_summary(const std::vector<CableResult>& cables);

/// The --json document: head, every row, the cables (bandwidth mode), the verdict and the exit
/// status `sparkrun doctor` ends with. One line.
std::string json_report(const ReportHead& head, const std::vector<JobRow>& rows,
                        const std::vector<CableResult>& cables);

}  // namespace spark::doctor
