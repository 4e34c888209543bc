// A job for the switchless-fabric tests (docs/fabric.md), run under sparkrun on the netns
// shapes.
//
//   fabric_job check     allreduce, allgather, broadcast (every root), alltoall at 8 B..1 MiB:
//                        each result checked against values computed locally (reductions
//                        folded in rank order, so the expected value is exact), and a digest
//                        of every result compared across ranks (bit-identical everywhere).
//                        Prints per-rank "ok" and, on rank 0, 1 MiB timings.
//   fabric_job pingpong  ranks 0 and P exchange 64 KiB forever (P = FABRIC_JOB_PEER, default
//                        2: the ring's opposite nodes, so through the relay); the other ranks
//                        wait in a barrier. Prints "pingpong running" once; the stall test
//                        stops the relay node.
//   fabric_job flood     rank 0 sends 8 MiB messages to rank P through the relay(s), both with
//                        their timeout raised to 120 s; the other ranks wait in a barrier.
//                        Prints "flood running"; the test stops rank 2 (the ring's
//                        destination, or the middle relay of a line), so only a relay's own
//                        stall detection (SPARKNET_ROCE_TIMEOUT_MS) can end the job.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "comm/communicator_impl.hpp"
#include "spark/spark.hpp"

namespace {

using spark::DType;
using spark::ReduceOp;

float value(int rank, std::size_t i) {
  // Values whose float sum depends on the order of the fold.
  return static_cast<float>(rank + 1) * 1.1f + static_cast<float>(i % 977) * 3.3e-4f +
         static_cast<float>(rank) * 1e-7f;
}

std::uint64_t digest(const void* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

int failures = 0;
void expect(bool ok, int rank, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "fabric_job: rank %d: %s\n", rank, what.c_str());
    ++failures;
  }
}

// Every rank's digest of `data` must equal rank 0's.
void same_everywhere(spark::Communicator& comm, const void* data, std::size_t n,
                     const std::string& what) {
  std::uint64_t mine = digest(data, n);
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(&mine, all.data(), 1, DType::i64);
  for (int r = 0; r < comm.size(); ++r)
    expect(all[static_cast<std::size_t>(r)] == all[0], comm.rank(),
           what + ": rank " + std::to_string(r) + "'s result differs from rank 0's");
}

// allgather and broadcast (every root) at one size.
void move_data(spark::Communicator& comm, std::size_t count, const std::string& sz) {
  const int rank = comm.rank(), size = comm.size();
  std::vector<float> in(count), all(count * static_cast<std::size_t>(size));
  for (std::size_t i = 0; i < count; ++i) in[i] = value(rank, i);
  comm.allgather(in.data(), all.data(), count, DType::f32);
  bool ok = true;
  for (int r = 0; r < size; ++r)
    for (std::size_t i = 0; i < count; ++i)
      ok = ok && all[static_cast<std::size_t>(r) * count + i] == value(r, i);
  expect(ok, rank, "allgather" + sz + " wrong");
  for (int root = 0; root < size; ++root) {
    std::vector<float> b(count);
    for (std::size_t i = 0; i < count; ++i) b[i] = rank == root ? value(root, i) : -1.0f;
    comm.broadcast(b.data(), count, DType::f32, root);
    ok = true;
    for (std::size_t i = 0; i < count; ++i) ok = ok && b[i] == value(root, i);
    expect(ok, rank, "broadcast" + sz + " from root " + std::to_string(root) + " wrong");
  }
}

void check(spark::Communicator& comm) {
  const int rank = comm.rank(), size = comm.size();
  const auto un = static_cast<std::size_t>(size);
  for (std::size_t bytes :
       {std::size_t{8}, std::size_t{4096}, std::size_t{100 * 1024}, std::size_t{1 << 20}}) {
    const std::size_t count = bytes / sizeof(float);
    const std::string sz = " " + std::to_string(bytes) + " B";
    std::vector<float> in(count), out(count), want(count);
    for (std::size_t i = 0; i < count; ++i) in[i] = value(rank, i);
    // allreduce: rank-order fold, as libspark promises.
    comm.allreduce(in.data(), out.data(), count, DType::f32, ReduceOp::sum);
    for (std::size_t i = 0; i < count; ++i) {
      float acc = value(0, i);
      for (int r = 1; r < size; ++r) acc += value(r, i);
      want[i] = acc;
    }
    expect(std::memcmp(out.data(), want.data(), bytes) == 0, rank, "allreduce" + sz + " wrong");
    same_everywhere(comm, out.data(), bytes, "allreduce" + sz);
    move_data(comm, count, sz);
    // The same with the ring forced at every size (a fully connected map has no ring).
    spark::internal::impl(comm).set_ring_min_bytes(0, 0);
    move_data(comm, count, sz + " (ring)");
    spark::internal::impl(comm).set_ring_min_bytes(64 * 1024, 4 << 20);
    // alltoall: block p of rank r is value(r * size + p, i)
    const std::size_t per = std::max<std::size_t>(1, count / un);
    std::vector<float> s(per * un), d(per * un);
    for (int p = 0; p < size; ++p)
      for (std::size_t i = 0; i < per; ++i)
        s[static_cast<std::size_t>(p) * per + i] = value(rank * size + p, i);
    comm.alltoall(s.data(), d.data(), per, DType::f32);
    bool ok = true;
    for (int p = 0; p < size; ++p)
      for (std::size_t i = 0; i < per; ++i)
        ok = ok && d[static_cast<std::size_t>(p) * per + i] == value(p * size + rank, i);
    expect(ok, rank, "alltoall" + sz + " wrong");
  }
  // 1 MiB timings (best of 5), for docs/fabric.md; FABRIC_JOB_BYTES=N times N bytes instead.
  const char* tb = std::getenv("FABRIC_JOB_BYTES");
  const std::size_t timed =
      tb != nullptr ? std::strtoull(tb, nullptr, 10) / sizeof(float) : 1 << 18;
  std::vector<float> in(std::max<std::size_t>(timed, un), 1.0f), out(in.size()),
      all(in.size() * un);
  auto best = [&](auto&& f) {
    double b = 1e9;
    for (int it = 0; it < 5; ++it) {
      comm.barrier();
      auto t0 = std::chrono::steady_clock::now();
      f();
      b = std::min(
          b,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return b;
  };
  double ar =
      best([&] { comm.allreduce(in.data(), out.data(), in.size(), DType::f32, ReduceOp::sum); });
  double ag = best([&] { comm.allgather(in.data(), all.data(), in.size() / un, DType::f32); });
  double bc = best([&] { comm.broadcast(in.data(), in.size(), DType::f32, 0); });
  // The same through the relay instead of the ring (on a fully connected map: no difference).
  spark::internal::impl(comm).set_ring_min_bytes(SIZE_MAX, SIZE_MAX);
  double ag_relay =
      best([&] { comm.allgather(in.data(), all.data(), in.size() / un, DType::f32); });
  double bc_relay = best([&] { comm.broadcast(in.data(), in.size(), DType::f32, 0); });
  spark::internal::impl(comm).set_ring_min_bytes(64 * 1024, 4 << 20);
  comm.barrier();
  if (rank == 0)
    std::printf("fabric_job: without the ring (relay): allgather %.2f ms, broadcast %.2f ms\n",
                ag_relay, bc_relay);
  if (rank == 0)
    std::printf(
        "fabric_job: %zu B allreduce %.2f ms, allgather (same total) %.2f ms, "
        "broadcast %.2f ms\n",
        in.size() * sizeof(float), ar, ag, bc);
  std::printf("fabric_job: rank %d %s (transport %s)\n", rank, failures == 0 ? "ok" : "FAILED",
              comm.transports().c_str());
}

// The far end of pingpong and flood (rank 0 is the other).
int far_peer(const spark::Communicator& comm) {
  const char* p = std::getenv("FABRIC_JOB_PEER");
  const int peer = p != nullptr ? std::atoi(p) : 2;
  if (peer <= 0 || peer >= comm.size()) {
    std::fprintf(stderr, "fabric_job: FABRIC_JOB_PEER must be 1..%d\n", comm.size() - 1);
    std::exit(2);
  }
  return peer;
}

void pingpong(spark::Communicator& comm) {
  const int rank = comm.rank();
  const int peer = far_peer(comm);
  if (rank != 0 && rank != peer) {
    comm.barrier();  // never completes: the job ends by the stall's abort
    return;
  }
  const int other = peer - rank;
  std::vector<float> buf(16384, static_cast<float>(rank));
  for (long it = 0;; ++it) {
    if (rank == 0) {
      comm.send(buf.data(), buf.size(), DType::f32, other);
      comm.recv(buf.data(), buf.size(), DType::f32, other);
    } else {
      comm.recv(buf.data(), buf.size(), DType::f32, other);
      comm.send(buf.data(), buf.size(), DType::f32, other);
    }
    if (it == 10 && rank == 0) {
      std::printf("pingpong running\n");
      std::fflush(stdout);
    }
  }
}

void flood(spark::Communicator& comm) {
  const int rank = comm.rank();
  const int peer = far_peer(comm);
  if (rank != 0 && rank != peer) {
    comm.barrier();
    return;
  }
  std::vector<float> buf(2 << 20, 1.0f);
  comm.set_timeout_ms(120000);  // neither end may end the job: only a relay's record
  for (long it = 0;; ++it) {
    if (rank == 0)
      comm.send(buf.data(), buf.size(), DType::f32, peer);
    else
      comm.recv(buf.data(), buf.size(), DType::f32, 0);
    if (it == 2 && rank == 0) {
      std::printf("flood running\n");
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "check" && mode != "pingpong" && mode != "flood") {
    std::fprintf(stderr, "usage: fabric_job check|pingpong|flood\n");
    return 2;
  }
  try {
    spark::Communicator comm = spark::init();
    if (mode == "check")
      check(comm);
    else if (mode == "pingpong")
      pingpong(comm);
    else
      flood(comm);
    std::fflush(stdout);
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fabric_job: %s\n", e.what());
    return 1;
  }
}
