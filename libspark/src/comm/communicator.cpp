// spark::Communicator: the public face; every call forwards to CommunicatorImpl.
#include "spark/communicator.hpp"

#include "comm/communicator_impl.hpp"

namespace spark {

Communicator::Communicator(std::unique_ptr<CommunicatorImpl> impl) : impl_(std::move(impl)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

namespace {
// SPARK_TRACE: one event per operation (with its seq, bytes and whether it failed). The flight
// recorder's entry, opened where the operation begins (CommunicatorImpl::begin), ends here.
template <class F>
void recorded(CommunicatorImpl& impl, F&& f) {
  FlightRecorder* r = impl.recorder();
  if (r == nullptr) return f();
  const std::uint64_t begun = r->begun();
  try {
    f();
  } catch (...) {
    if (r->begun() != begun) r->end(true);
    throw;
  }
  if (r->begun() != begun) r->end(false);
}
template <class F>
void traced(CommunicatorImpl& impl, const char* name, std::uint64_t bytes, F&& f) {
  Trace* t = impl.trace();
  if (t == nullptr) {
    recorded(impl, f);
    return;
  }
  const auto begin = Trace::Clock::now();
  try {
    recorded(impl, f);
  } catch (...) {
    t->op(name, impl.current_seq(), bytes, begin, Trace::Clock::now(), true);
    throw;
  }
  t->op(name, impl.current_seq(), bytes, begin, Trace::Clock::now(), false);
}
}  // namespace

void Communicator::set_allreduce_algo(AllreduceAlgo algo) noexcept {
  impl_->set_allreduce_algo(algo);
}
void Communicator::set_piece_bytes(std::size_t bytes) noexcept {
  impl_->set_piece_bytes(bytes);
}

std::string Communicator::node_id() const {
  return impl_->node_id();
}
std::string Communicator::transports() const {
  return impl_->transport_summary();
}
int Communicator::rank() const noexcept {
  return impl_->rank();
}
int Communicator::size() const noexcept {
  return impl_->size();
}
std::optional<Communicator> Communicator::split(int color, int key) {
  std::unique_ptr<CommunicatorImpl> sub;
  traced(*impl_, "split", 0, [&] { sub = impl_->split(color, key); });
  if (!sub) return std::nullopt;
  return Communicator(std::move(sub));
}
Communicator Communicator::dup() {
  std::unique_ptr<CommunicatorImpl> sub;
  traced(*impl_, "dup", 0, [&] { sub = impl_->dup(); });
  return Communicator(std::move(sub));
}
const std::string& Communicator::name() const noexcept {
  return impl_->name();
}
int Communicator::local_rank() const noexcept {
  return impl_->local_rank();
}
int Communicator::local_size() const noexcept {
  return impl_->local_size();
}

void Communicator::allreduce(const void* send, void* recv, std::size_t count, DType dtype,
                             ReduceOp op) {
  traced(*impl_, "allreduce", count * dtype_size(dtype),
         [&] { impl_->allreduce(send, recv, count, dtype, op); });
}
void Communicator::reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                                  ReduceOp op) {
  traced(*impl_, "reduce_scatter", recv_count * dtype_size(dtype),
         [&] { impl_->reduce_scatter(send, recv, recv_count, dtype, op); });
}
void Communicator::allgather(const void* send, void* recv, std::size_t send_count, DType dtype) {
  traced(*impl_, "allgather", send_count * dtype_size(dtype),
         [&] { impl_->allgather(send, recv, send_count, dtype); });
}
void Communicator::broadcast(void* buffer, std::size_t count, DType dtype, int root) {
  traced(*impl_, "broadcast", count * dtype_size(dtype),
         [&] { impl_->broadcast(buffer, count, dtype, root); });
}
void Communicator::alltoall(const void* send, void* recv, std::size_t count, DType dtype) {
  traced(*impl_, "alltoall", count * dtype_size(dtype),
         [&] { impl_->alltoall(send, recv, count, dtype); });
}
void Communicator::alltoallv(const void* send, const std::size_t* send_counts,
                             const std::size_t* send_displs, void* recv,
                             const std::size_t* recv_counts, const std::size_t* recv_displs,
                             DType dtype) {
  traced(*impl_, "alltoallv", 0, [&] {
    impl_->alltoallv(send, send_counts, send_displs, recv, recv_counts, recv_displs, dtype);
  });
}
void Communicator::send(const void* buffer, std::size_t count, DType dtype, int peer) {
  traced(*impl_, "send", count * dtype_size(dtype),
         [&] { impl_->send(buffer, count, dtype, peer); });
}
void Communicator::recv(void* buffer, std::size_t count, DType dtype, int peer) {
  traced(*impl_, "recv", count * dtype_size(dtype),
         [&] { impl_->recv(buffer, count, dtype, peer); });
}
void Communicator::barrier() {
  traced(*impl_, "barrier", 0, [&] { impl_->barrier(); });
}

std::optional<FailureRecord> Communicator::failure() const {
  return impl_->failure();
}
void Communicator::check_health() const {
  impl_->check_health();
}
void Communicator::set_timeout_ms(std::uint32_t ms) {
  impl_->set_timeout_ms(ms);
}
std::uint32_t Communicator::timeout_ms() const noexcept {
  return impl_->timeout_ms();
}

namespace {
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<std::uint8_t>() {
  return DType::u8;
}
}  // namespace

template <class T>
void Communicator::allreduce(std::span<T> inout, ReduceOp op) {
  impl_->allreduce(inout.data(), inout.data(), inout.size(), dtype_of<T>(), op);
}
template void Communicator::allreduce<float>(std::span<float>, ReduceOp);
template void Communicator::allreduce<double>(std::span<double>, ReduceOp);
template void Communicator::allreduce<std::int32_t>(std::span<std::int32_t>, ReduceOp);
template void Communicator::allreduce<std::int64_t>(std::span<std::int64_t>, ReduceOp);
template void Communicator::allreduce<std::uint8_t>(std::span<std::uint8_t>, ReduceOp);

}  // namespace spark
