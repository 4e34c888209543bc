// The pinned fabric file (`--fabric FILE`, docs/fabric.md) and the lane lists ranks publish
// through the bootstrap (fabric::decode_lanes; the doctor's and the fabric discovery's
// spark.*.tcp / .rdma keys). The first byte chooses the parser. A bad file is a ConfigError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fabric/fabric_file.hpp"
#include "fabric/fabric_map.hpp"
#include "fabric/local_lanes.hpp"
#include "spark/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0: {
        const auto f = spark::fabric::parse_fabric_json(text, "fuzz.json");
        // What sparkrun does with a pinned file: compares it and prints it.
        (void)spark::fabric::compare(f, f);
        (void)spark::fabric::to_json(f);
        break;
      }
      case 1:
        (void)spark::fabric::decode_lanes(text);
        break;
      default:
        (void)spark::fabric::parse_nets(text, "SPARK_DATA_NET");
        break;
    }
  } catch (const spark::Error&) {
  }
  return 0;
}
