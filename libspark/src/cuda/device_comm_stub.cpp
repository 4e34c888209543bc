// spark::cuda without CUDA: every entry point says so clearly.
#include "spark/communicator.hpp"
#include "spark/cuda.hpp"
#include "spark/error.hpp"

namespace spark::cuda {

namespace {
[[noreturn]] void no_cuda() {
  throw InvalidUsage(
      "device pointer passed but libspark was built without CUDA: rebuild sparkrun with the "
      "CUDA toolkit installed (nvcc under /usr/local/cuda) and -DSPARK_ENABLE_CUDA=ON, or pass "
      "host buffers");
}
}  // namespace

class DeviceCommImpl {};

bool built_with_cuda() noexcept {
  return false;
}
bool is_device_pointer(const void*) noexcept {
  return false;
}

DeviceComm::DeviceComm(Communicator&, std::size_t) {
  no_cuda();
}
DeviceComm::~DeviceComm() = default;
DeviceComm::DeviceComm(DeviceComm&&) noexcept = default;
DeviceComm& DeviceComm::operator=(DeviceComm&&) noexcept = default;
void DeviceComm::allreduce(const void*, void*, std::size_t, DType, ReduceOp, Stream) {
  no_cuda();
}
void DeviceComm::synchronize() {
  no_cuda();
}
std::optional<FailureRecord> DeviceComm::failure() const {
  return std::nullopt;
}
void DeviceComm::check_health() const {}
void DeviceComm::set_timeout_ms(std::uint32_t) {
  no_cuda();
}
std::uint32_t DeviceComm::timeout_ms() const noexcept {
  return 0;
}
std::size_t DeviceComm::max_bytes() const noexcept {
  return 0;
}
void DeviceComm::set_report_failures(bool) noexcept {}

}  // namespace spark::cuda
