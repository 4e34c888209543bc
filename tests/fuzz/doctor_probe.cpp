// What `sparkrun doctor`'s probe ranks publish to each other through the bootstrap
// (launcher/src/doctor_job.hpp: rows, lanes, RDMA device lists). Another rank's bytes are
// outside input: a malformed value must be a spark::Error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "doctor_job.hpp"
#include "fabric/rdma_lanes.hpp"
#include "spark/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if ((data[0] & 1) != 0) {
      const auto rows = spark::launch::doctor::decode_rows(text);
      // A decoded table is printed: render it and its exit status.
      (void)spark::launch::doctor::render_job(rows);
      (void)spark::launch::doctor::job_exit_code(rows);
    } else {
      (void)spark::fabric::parse_rdma_devices(text, "SPARK_IB_HCA");
    }
  } catch (const spark::Error&) {
  }
  return 0;
}
