// Ring algorithms for fabrics that are not fully connected (docs/fabric.md, "Algorithm
// choice"): on a 4-ring the opposite node is reached only through a relay, so large
// allgather and broadcast follow the cycle of direct links instead (ring_, the same on every
// rank, set at wire-up from the fabric map). Both only move data, so results are bitwise the
// same as the direct algorithms'. Reductions keep the direct two-phase algorithm (its fixed
// rank-order fold is what makes results bit-identical; a ring would fold in ring order) and
// reach the opposite node through the relay.
#include <algorithm>
#include <cstring>

#include "comm/communicator_impl.hpp"

namespace spark {

namespace {
std::size_t ring_pos(const std::vector<int>& ring, int rank) {
  return static_cast<std::size_t>(std::find(ring.begin(), ring.end(), rank) - ring.begin());
}
}  // namespace

bool CommunicatorImpl::use_ring(std::size_t bytes) const noexcept {
  return size_ > 2 && ring_.size() == static_cast<std::size_t>(size_) && bytes >= ring_min_bytes_;
}

bool CommunicatorImpl::use_broadcast_ring(std::size_t bytes) const noexcept {
  return size_ > 2 && ring_.size() == static_cast<std::size_t>(size_) &&
         bytes >= ring_bcast_min_bytes_;
}

// Step s: pass the block that came from s hops to the left on to the right neighbour.
void CommunicatorImpl::allgather_ring(const std::byte* own, std::byte* out, std::size_t send_count,
                                      DType dtype) {
  (void)own;  // already copied into out[rank]
  const std::size_t es = dtype_size(dtype), pe = std::max<std::size_t>(1, piece_ / es);
  const std::size_t bytes = send_count * es;
  const auto n = ring_.size();
  const std::size_t pos = ring_pos(ring_, rank_);
  const int right = ring_[(pos + 1) % n], left = ring_[(pos + n - 1) % n];
  const std::size_t np = std::max<std::size_t>(1, (send_count + pe - 1) / pe);
  for (std::size_t s = 0; s + 1 < n; ++s) {
    const auto send_block = static_cast<std::size_t>(ring_[(pos + n - s) % n]);
    const auto recv_block = static_cast<std::size_t>(ring_[(pos + 2 * n - s - 1) % n]);
    for (std::size_t k = 0; k < np; ++k) {
      const std::size_t b = std::min(send_count, k * pe), len = std::min(pe, send_count - b);
      const auto ss = static_cast<std::uint32_t>(s), kk = static_cast<std::uint32_t>(k);
      post(right, ss, kk, out + send_block * bytes + b * es, len * es, send_count);
      transport::RecvView v = take(left, ss, kk, len * es, send_count);
      if (len > 0) std::memcpy(out + recv_block * bytes + b * es, v.data, len * es);
      give_back(left);
    }
  }
  drain();
}

// A pipelined chain from the root around the ring; the last rank (the root's left
// neighbour) confirms with an empty message, so a call every rank disagrees on is caught.
void CommunicatorImpl::broadcast_ring(std::byte* buf, std::size_t count, DType dtype, int root) {
  const std::size_t es = dtype_size(dtype), pe = std::max<std::size_t>(1, piece_ / es);
  const auto n = ring_.size();
  const std::size_t pos = ring_pos(ring_, rank_);
  const std::size_t d = (pos + n - ring_pos(ring_, root)) % n;  // hops from the root
  const int next = ring_[(pos + 1) % n], prev = ring_[(pos + n - 1) % n];
  const std::size_t np = std::max<std::size_t>(1, (count + pe - 1) / pe);
  for (std::size_t k = 0; k < np; ++k) {
    const std::size_t b = std::min(count, k * pe), len = std::min(pe, count - b);
    const auto kk = static_cast<std::uint32_t>(k);
    if (d > 0) {
      transport::RecvView v = take(prev, 0, kk, len * es, count);
      if (len > 0) std::memcpy(buf + b * es, v.data, len * es);
      give_back(prev);
    }
    if (d + 1 < n) post(next, 0, kk, buf + b * es, len * es, count);
  }
  if (d + 1 == n) post(next, 1, 0, nullptr, 0, count);
  if (d == 0) {
    take(prev, 1, 0, 0, count);
    give_back(prev);
  }
  drain();
}

}  // namespace spark
