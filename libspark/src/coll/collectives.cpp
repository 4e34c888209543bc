// Collective algorithms over the mailbox transports. All of them are deterministic: every
// reduction folds contributions in rank order 0..n-1 (coll::reduce_n), whichever rank computes
// it, so every rank gets bit-identical output and runs repeat bit for bit.
//
//  allreduce, small: one-shot: every rank sends its whole buffer to every peer and reduces
//                    all n inputs locally (1 step, latency-optimal for n <= ~8).
//  allreduce, large: two-phase: reduce-scatter where the owner of chunk r gathers the n-1
//                    contributions and reduces them in rank order, then allgather of the
//                    reduced chunks. Each rank sends/receives 2(n-1)/n of the data, as a ring
//                    does, but the order of the fold is fixed (a ring's is not).
//  Data moves in slot-sized pieces; piece k of every peer is handled in lock step so the
//  mailboxes (slots per peer) bound the memory in flight and the loops cannot deadlock.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "coll/partition.hpp"
#include "coll/reduce.hpp"
#include "comm/communicator_impl.hpp"
#include "spark/error.hpp"

namespace spark {

using coll::block;
using coll::peer_at;
using coll::piece;
using coll::pieces;
using coll::Range;

namespace {

void need(bool ok, const char* what) {
  if (!ok) throw InvalidUsage(what);
}
CallDesc call(Coll c, DType dt, std::uint8_t op, std::int32_t root, std::uint64_t count) {
  CallDesc d;
  d.coll = c;
  d.dtype = static_cast<std::uint8_t>(dt);
  d.op = op;
  d.root = root;
  d.count = count;
  return d;
}

}  // namespace

void CommunicatorImpl::allreduce(const void* send, void* recv, std::size_t count, DType dtype,
                                 ReduceOp op) {
  need(count == 0 || (send != nullptr && recv != nullptr), "allreduce: null buffer with count > 0");
  begin("allreduce", call(Coll::allreduce, dtype, static_cast<std::uint8_t>(op), -1, count));
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  if (size_ == 1) {
    if (count > 0 && in != out) std::memcpy(out, in, count * dtype_size(dtype));
    return;
  }
  const std::size_t bytes = count * dtype_size(dtype);
  if (algo_ == AllreduceAlgo::one_shot || (one_shot_size(bytes) && !copy_tuned(bytes)))
    allreduce_one_shot(in, out, count, dtype, op);
  else
    reduce_large(in, out, count, dtype, op, true);
}

void CommunicatorImpl::allreduce_one_shot(const std::byte* in, std::byte* out, std::size_t count,
                                          DType dtype, ReduceOp op) {
  ++one_shot_calls_;
  const std::size_t es = dtype_size(dtype), pe = piece_ / es;
  // The latency path: no heap allocation per call for the usual rank counts.
  constexpr int kStackRanks = 16;
  const void* stack_inputs[kStackRanks];
  std::vector<const void*> heap_inputs;
  const void** inputs = stack_inputs;
  if (size_ > kStackRanks) {
    heap_inputs.resize(static_cast<std::size_t>(size_));
    inputs = heap_inputs.data();
  }
  const std::size_t np = pieces(count, pe);
  for (std::size_t k = 0; k < np; ++k) {
    const Range pc = piece(count, pe, k);
    const auto kk = static_cast<std::uint32_t>(k);
    post_to_peers(0, kk, in + pc.begin * es, pc.len * es, count);
    for (int i = 1; i < size_; ++i) {
      const int p = peer_at(rank_, size_, i);
      const std::byte* d = take(p, 0, kk, pc.len * es, count).data;
      inputs[static_cast<std::size_t>(p)] = d;
      // The payload was just written by another core: ask for all its lines at once, so the
      // reduction (which reads them in order) does not miss line by line. Small pieces only.
      if (pc.len * es <= 8192)
        for (std::size_t off = 0; off < pc.len * es; off += 64) __builtin_prefetch(d + off);
    }
    inputs[static_cast<std::size_t>(rank_)] = in + pc.begin * es;
    coll::reduce_n(out + pc.begin * es, inputs, size_, pc.len, dtype, op);
    for (int i = 1; i < size_; ++i) give_back(peer_at(rank_, size_, i));
  }
  drain();
}

// in: the full vector (n chunks). out: the full vector when gather (allreduce), else only this
// rank's reduced chunk (reduce_scatter). chunk r = block(count, n, r) (or equal blocks of
// count/n for reduce_scatter, which passes a count divisible by n).
void CommunicatorImpl::allreduce_two_phase(const std::byte* in, std::byte* out, std::size_t count,
                                           DType dtype, ReduceOp op, bool gather) {
  const std::size_t es = dtype_size(dtype), pe = piece_ / es;
  const std::uint64_t desc_count = op_.call.count;
  std::vector<Range> chunk(static_cast<std::size_t>(size_));
  std::vector<std::size_t> np(static_cast<std::size_t>(size_));
  std::size_t kmax = 0;
  for (int r = 0; r < size_; ++r) {
    chunk[static_cast<std::size_t>(r)] = block(count, size_, r);
    np[static_cast<std::size_t>(r)] = pieces(chunk[static_cast<std::size_t>(r)].len, pe);
    kmax = std::max(kmax, np[static_cast<std::size_t>(r)]);
  }
  const Range mine = chunk[static_cast<std::size_t>(rank_)];
  std::byte* my_out = gather ? out + mine.begin * es : out;
  std::vector<const void*> inputs(static_cast<std::size_t>(size_));
  // Pipelined: reduce-scatter pieces go out kAhead pieces before they are folded, so a rank
  // that folds piece k already has piece k+1 in its mailbox instead of waiting for the peer to
  // copy it (lock step cost a hand-off per piece: 64 for a 16 MiB allreduce on 2 ranks). Every
  // rank posts and takes in the same order (per peer: RS 0..kAhead-1, then per k: AG k,
  // RS k+kAhead), so the FIFO mailboxes line up; at most 2*kAhead+2 messages wait per peer.
  constexpr std::size_t kAhead = 2;
  auto post_rs = [&](std::size_t k) {
    post_to_peers(0, static_cast<std::uint32_t>(k), [&](int p) -> std::optional<Outgoing> {
      const auto up = static_cast<std::size_t>(p);
      if (k >= np[up]) return std::nullopt;
      const Range pc = piece(chunk[up].len, pe, k);
      return Outgoing{in + (chunk[up].begin + pc.begin) * es, pc.len * es, desc_count};
    });
  };
  auto take_ag = [&](std::size_t k) {
    for (int i = 1; i < size_; ++i) {
      const int p = peer_at(rank_, size_, i);
      const auto up = static_cast<std::size_t>(p);
      if (k >= np[up]) continue;
      const Range pc = piece(chunk[up].len, pe, k);
      transport::RecvView v = take(p, 1, static_cast<std::uint32_t>(k), pc.len * es, desc_count);
      if (pc.len > 0) std::memcpy(out + (chunk[up].begin + pc.begin) * es, v.data, pc.len * es);
      give_back(p);
    }
  };
  for (std::size_t k = 0; k < std::min(kAhead, kmax); ++k) post_rs(k);
  for (std::size_t k = 0; k < kmax; ++k) {
    const auto kk = static_cast<std::uint32_t>(k);
    if (gather && k >= kAhead) take_ag(k - kAhead);
    // Phase 0 (reduce-scatter): fold piece k of this rank's chunk.
    if (k < np[static_cast<std::size_t>(rank_)]) {
      const Range pc = piece(mine.len, pe, k);
      for (int i = 1; i < size_; ++i) {
        const int p = peer_at(rank_, size_, i);
        inputs[static_cast<std::size_t>(p)] = take(p, 0, kk, pc.len * es, desc_count).data;
      }
      inputs[static_cast<std::size_t>(rank_)] = in + (mine.begin + pc.begin) * es;
      coll::reduce_n(my_out + pc.begin * es, inputs.data(), size_, pc.len, dtype, op);
      for (int i = 1; i < size_; ++i) give_back(peer_at(rank_, size_, i));
      // Phase 1 (allgather): the reduced piece goes to every peer.
      if (gather) post_to_peers(1, kk, my_out + pc.begin * es, pc.len * es, desc_count);
    }
    if (k + kAhead < kmax) post_rs(k + kAhead);
  }
  if (gather)
    for (std::size_t k = kmax > kAhead ? kmax - kAhead : 0; k < kmax; ++k) take_ag(k);
  drain();
}

void CommunicatorImpl::reduce_scatter(const void* send, void* recv, std::size_t recv_count,
                                      DType dtype, ReduceOp op) {
  need(recv_count == 0 || (send != nullptr && recv != nullptr),
       "reduce_scatter: null buffer with count > 0");
  begin("reduce_scatter",
        call(Coll::reduce_scatter, dtype, static_cast<std::uint8_t>(op), -1, recv_count));
  if (size_ == 1) {
    if (recv_count > 0 && send != recv) std::memmove(recv, send, recv_count * dtype_size(dtype));
    return;
  }
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  const std::size_t count = recv_count * static_cast<std::size_t>(size_);
  reduce_large(in, out, count, dtype, op, false);
}

void CommunicatorImpl::allgather(const void* send, void* recv, std::size_t send_count,
                                 DType dtype) {
  need(send_count == 0 || (send != nullptr && recv != nullptr),
       "allgather: null buffer with count > 0");
  begin("allgather", call(Coll::allgather, dtype, 0, -1, send_count));
  const std::size_t es = dtype_size(dtype), pe = piece_ / es, bytes = send_count * es;
  auto* out = static_cast<std::byte*>(recv);
  const auto* in = static_cast<const std::byte*>(send);
  std::byte* own = out + static_cast<std::size_t>(rank_) * bytes;
  if (bytes > 0 && own != in) std::memmove(own, in, bytes);
  if (size_ == 1) return;
  if (use_ring(bytes)) return allgather_ring(own, out, send_count, dtype);  // coll/ring.cpp
  const std::size_t np = pieces(send_count, pe);
  for (std::size_t k = 0; k < np; ++k) {
    const Range pc = piece(send_count, pe, k);
    const auto kk = static_cast<std::uint32_t>(k);
    post_to_peers(0, kk, own + pc.begin * es, pc.len * es, send_count);
    for (int i = 1; i < size_; ++i) {
      const int p = peer_at(rank_, size_, i);
      transport::RecvView v = take(p, 0, kk, pc.len * es, send_count);
      if (pc.len > 0)
        std::memcpy(out + static_cast<std::size_t>(p) * bytes + pc.begin * es, v.data, pc.len * es);
      give_back(p);
    }
  }
  drain();
}

void CommunicatorImpl::broadcast(void* buffer, std::size_t count, DType dtype, int root) {
  need(root >= 0 && root < size_, "broadcast: root is not a rank of this communicator (0..size-1)");
  need(count == 0 || buffer != nullptr, "broadcast: null buffer with count > 0");
  begin("broadcast", call(Coll::broadcast, dtype, 0, root, count));
  if (size_ == 1) return;
  const std::size_t es = dtype_size(dtype), pe = piece_ / es;
  auto* buf = static_cast<std::byte*>(buffer);
  if (use_broadcast_ring(count * es)) return broadcast_ring(buf, count, dtype, root);  // ring.cpp
  const std::size_t np = pieces(count, pe);
  if (rank_ == root) {
    for (std::size_t k = 0; k < np; ++k) {
      const Range pc = piece(count, pe, k);
      post_to_peers(0, static_cast<std::uint32_t>(k), buf + pc.begin * es, pc.len * es, count);
    }
    // Every other rank confirms with an empty message: ranks that disagree about the root
    // (or the call) are caught here, not left holding a buffer that was never filled.
    for (int i = 1; i < size_; ++i) {
      const int p = peer_at(rank_, size_, i);
      take(p, 1, 0, 0, count);
      give_back(p);
    }
  } else {
    post(root, 1, 0, nullptr, 0, count);
    for (std::size_t k = 0; k < np; ++k) {
      const Range pc = piece(count, pe, k);
      transport::RecvView v = take(root, 0, static_cast<std::uint32_t>(k), pc.len * es, count);
      if (pc.len > 0) std::memcpy(buf + pc.begin * es, v.data, pc.len * es);
      give_back(root);
    }
  }
  drain();
}

void CommunicatorImpl::alltoall(const void* send, void* recv, std::size_t count, DType dtype) {
  need(count == 0 || (send != nullptr && recv != nullptr), "alltoall: null buffer with count > 0");
  need(count == 0 || send != recv, "alltoall: send and recv must not be the same buffer");
  std::vector<std::size_t> counts(static_cast<std::size_t>(size_), count),
      displs(static_cast<std::size_t>(size_));
  for (std::size_t r = 0; r < displs.size(); ++r) displs[r] = r * count;
  begin("alltoall", call(Coll::alltoall, dtype, 0, -1, count));
  // Same exchange as alltoallv; the call descriptor stays "alltoall".
  const std::size_t es = dtype_size(dtype), pe = piece_ / es;
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  if (count > 0)
    std::memcpy(out + displs[static_cast<std::size_t>(rank_)] * es,
                in + displs[static_cast<std::size_t>(rank_)] * es, count * es);
  if (size_ == 1) return;
  const std::size_t np = pieces(count, pe);
  for (std::size_t k = 0; k < np; ++k) {
    const Range pc = piece(count, pe, k);
    const auto kk = static_cast<std::uint32_t>(k);
    post_to_peers(0, kk, [&](int p) {
      return std::optional<Outgoing>(
          Outgoing{in + (displs[static_cast<std::size_t>(p)] + pc.begin) * es, pc.len * es, count});
    });
    for (int i = 1; i < size_; ++i) {
      const int p = peer_at(rank_, size_, i);
      transport::RecvView v = take(p, 0, kk, pc.len * es, count);
      if (pc.len > 0)
        std::memcpy(out + (displs[static_cast<std::size_t>(p)] + pc.begin) * es, v.data,
                    pc.len * es);
      give_back(p);
    }
  }
  drain();
}

void CommunicatorImpl::alltoallv(const void* send, const std::size_t* send_counts,
                                 const std::size_t* send_displs, void* recv,
                                 const std::size_t* recv_counts, const std::size_t* recv_displs,
                                 DType dtype) {
  need(send_counts != nullptr && send_displs != nullptr && recv_counts != nullptr &&
           recv_displs != nullptr,
       "alltoallv: counts and displacements must not be null");
  const auto me = static_cast<std::size_t>(rank_);
  need(send_counts[me] == recv_counts[me],
       "alltoallv: send_counts[rank] must equal recv_counts[rank] (the block a rank sends itself)");
  begin("alltoallv", call(Coll::alltoallv, dtype, 0, -1, 0));
  const std::size_t es = dtype_size(dtype), pe = piece_ / es;
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  if (send_counts[me] > 0)
    std::memmove(out + recv_displs[me] * es, in + send_displs[me] * es, send_counts[me] * es);
  if (size_ == 1) return;
  std::size_t kmax = 0;
  for (int i = 1; i < size_; ++i) {
    const auto p = static_cast<std::size_t>(peer_at(rank_, size_, i));
    kmax = std::max({kmax, pieces(send_counts[p], pe), pieces(recv_counts[p], pe)});
  }
  for (std::size_t k = 0; k < kmax; ++k) {
    const auto kk = static_cast<std::uint32_t>(k);
    post_to_peers(0, kk, [&](int p) -> std::optional<Outgoing> {
      const auto up = static_cast<std::size_t>(p);
      if (k >= pieces(send_counts[up], pe)) return std::nullopt;
      const Range pc = piece(send_counts[up], pe, k);
      return Outgoing{in + (send_displs[up] + pc.begin) * es, pc.len * es, send_counts[up]};
    });
    for (int i = 1; i < size_; ++i) {
      const int p = peer_at(rank_, size_, i);
      const auto up = static_cast<std::size_t>(p);
      if (k >= pieces(recv_counts[up], pe)) continue;
      const Range pc = piece(recv_counts[up], pe, k);
      transport::RecvView v = take(p, 0, kk, pc.len * es, recv_counts[up]);
      if (pc.len > 0) std::memcpy(out + (recv_displs[up] + pc.begin) * es, v.data, pc.len * es);
      give_back(p);
    }
  }
  drain();
}

void CommunicatorImpl::send(const void* buffer, std::size_t count, DType dtype, int peer) {
  need(peer >= 0 && peer < size_ && peer != rank_,
       "send: peer must be another rank of this communicator");
  need(count == 0 || buffer != nullptr, "send: null buffer with count > 0");
  begin_p2p("send", call(Coll::sendrecv, dtype, 0, -1, count), peer, true);
  const std::size_t es = dtype_size(dtype), pe = piece_ / es;
  const auto* in = static_cast<const std::byte*>(buffer);
  const std::size_t np = pieces(count, pe);
  for (std::size_t k = 0; k < np; ++k) {
    const Range pc = piece(count, pe, k);
    post(peer, 0, static_cast<std::uint32_t>(k), in + pc.begin * es, pc.len * es, count);
  }
  drain();
}

void CommunicatorImpl::recv(void* buffer, std::size_t count, DType dtype, int peer) {
  need(peer >= 0 && peer < size_ && peer != rank_,
       "recv: peer must be another rank of this communicator");
  need(count == 0 || buffer != nullptr, "recv: null buffer with count > 0");
  begin_p2p("recv", call(Coll::sendrecv, dtype, 0, -1, count), peer, false);
  const std::size_t es = dtype_size(dtype), pe = piece_ / es;
  auto* out = static_cast<std::byte*>(buffer);
  const std::size_t np = pieces(count, pe);
  for (std::size_t k = 0; k < np; ++k) {
    const Range pc = piece(count, pe, k);
    transport::RecvView v = take(peer, 0, static_cast<std::uint32_t>(k), pc.len * es, count);
    if (pc.len > 0) std::memcpy(out + pc.begin * es, v.data, pc.len * es);
    give_back(peer);
  }
}

void CommunicatorImpl::barrier() {
  begin("barrier", call(Coll::barrier, DType::u8, 0, -1, 0), true);
  if (size_ == 1) return;
  post_to_peers(0, 0, nullptr, 0, 0);
  for (int i = 1; i < size_; ++i) {
    const int p = peer_at(rank_, size_, i);
    take(p, 0, 0, 0, 0);
    give_back(p);
  }
  drain();
}

}  // namespace spark
