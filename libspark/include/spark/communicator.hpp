// The world communicator: collectives over host buffers with fail-stop semantics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "spark/failure.hpp"
#include "spark/types.hpp"

namespace spark {

class CommunicatorImpl;
class CommunicatorAccess;

/// Returned by spark::init(). Movable, not copyable. Every collective is blocking, is called by
/// every rank in the same order, and either completes with correct data on every rank or
/// throws spark::CommFailure (after which every call throws the same record at once).
class Communicator {
 public:
  explicit Communicator(std::unique_ptr<CommunicatorImpl> impl);
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  ~Communicator();

  int rank() const noexcept;
  int size() const noexcept;

  /// MPI_Comm_split: collective over this communicator (bounded by its timeout). Ranks that
  /// pass the same color >= 0 form one new communicator, ranked by key, then by rank here; a
  /// negative color gets std::nullopt. The new communicator has its own sequence numbers,
  /// mismatch detection and timeout (this one's, then settable), reuses this one's connections
  /// (no new sockets, segments or QPs), and must be destroyed before the world communicator.
  /// Ranks that share several communicators must call their collectives in the same order
  /// (else: a mismatch failure). A failure in any communicator fails every communicator of
  /// the rank; the record's detail names the one it happened in, e.g. "comm 1 (color 0, size 2)".
  std::optional<Communicator> split(int color, int key);
  /// The same ranks in the same order as a separate communicator (collective).
  Communicator dup();
  /// "world", or e.g. "comm 1 (color 0, size 2)" / "comm 1.2 (dup, size 2)".
  const std::string& name() const noexcept;
  int local_rank() const noexcept;
  int local_size() const noexcept;
  /// This rank's node (SPARK_HOST from the launcher, else the host name).
  std::string node_id() const;
  /// What this rank uses to reach this communicator's other members: "shm", "tcp",
  /// "shm+tcp", "roce", or "self" (a communicator of one rank).
  std::string transports() const;

  /// recv may equal send (in place). count elements on every rank.
  void allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op);
  /// send holds size()*recv_count elements; rank r receives block r reduced.
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                      ReduceOp op);
  /// recv holds size()*send_count elements, block r from rank r.
  void allgather(const void* send, void* recv, std::size_t send_count, DType dtype);
  void broadcast(void* buffer, std::size_t count, DType dtype, int root);
  /// count elements to each rank; send and recv hold size()*count elements.
  void alltoall(const void* send, void* recv, std::size_t count, DType dtype);
  /// Counts and displacements in elements, one per rank.
  void alltoallv(const void* send, const std::size_t* send_counts, const std::size_t* send_displs,
                 void* recv, const std::size_t* recv_counts, const std::size_t* recv_displs,
                 DType dtype);
  void send(const void* buffer, std::size_t count, DType dtype, int peer);
  void recv(void* buffer, std::size_t count, DType dtype, int peer);

  /// Waits until every rank has called barrier(). Uses SPARK_BARRIER_TIMEOUT_MS (long), not the
  /// communication timeout: call it after long, skewed preparation (model loading, JIT) so that
  /// SPARKNET_ROCE_TIMEOUT_MS only ever measures communication.
  void barrier();

  /// The failure record, if the communicator has failed.
  std::optional<FailureRecord> failure() const;
  /// Throws spark::CommFailure carrying the record if the communicator has failed.
  void check_health() const;
  /// Deadline of every following wait on a peer; safe to call from any thread at any time.
  void set_timeout_ms(std::uint32_t ms);
  std::uint32_t timeout_ms() const noexcept;

  /// For measurements (allreduce_perf); every rank must set the same values (else: a
  /// mismatch failure). The allreduce algorithm, and the bytes per message (rounded down to
  /// 64, at most the transports' slot size).
  void set_allreduce_algo(AllreduceAlgo algo) noexcept;
  void set_piece_bytes(std::size_t bytes) noexcept;

  /// Typed helpers.
  template <class T>
  void allreduce(std::span<T> inout, ReduceOp op = ReduceOp::sum);

 private:
  friend class CommunicatorAccess;
  std::unique_ptr<CommunicatorImpl> impl_;
};

}  // namespace spark
