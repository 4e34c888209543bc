// What probe ranks publish to each other through the bootstrap: `sparkrun doctor`'s rows
// (libspark/tools/doctor_probe/job_table.hpp), the fabric probe protocol's result triples and port
// lists (libspark/src/fabric/probe_protocol.hpp; wire-up, spark_fabric_discover and the doctor),
// and RDMA device lists. Another rank's bytes are outside input: a malformed value must be a
// spark::Error, never a crash. Byte 0 chooses the decoder.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fabric/probe_protocol.hpp"
#include "fabric/rdma_lanes.hpp"
#include "job_table.hpp"
#include "spark/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: {
        const auto rows = spark::doctor::decode_rows(text);
        // A decoded table is printed: render it and its exit status.
        (void)spark::doctor::render_job(rows);
        (void)spark::doctor::verdict(rows).exit_code();
        break;
      }
      case 1:
        (void)spark::fabric::decode_triples(text);
        break;
      case 2:
        (void)spark::fabric::decode_ports(text, "rank 1");
        break;
      default:
        (void)spark::fabric::parse_rdma_devices(text, "SPARK_IB_HCA");
        break;
    }
  } catch (const spark::Error&) {
  }
  return 0;
}
