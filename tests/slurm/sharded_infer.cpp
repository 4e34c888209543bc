// A toy batch "sharded inference" job for docs/slurm.md's sbatch example: the shape of a
// tensor-parallel layer with a real libspark job around it, small enough for CI.
//
// The model is one linear layer y = W x (kOut x kIn). Rank r of n holds only the columns
// [r*kIn/n, (r+1)*kIn/n) of W (its shard, "loaded" at start) and the matching slice of every
// input; y = sum over ranks of the partial products, i.e. one allreduce per batch.
// Rank 0 reads the prompts (one per line) and broadcasts them; it writes one result line per
// prompt and checks every result against the unsharded layer computed on its own.
// Integer weights and inputs keep the sums exact, so the check is bit for bit.
//
//   sharded_infer --prompts FILE --out FILE
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "spark/spark.hpp"

namespace {

constexpr int kIn = 96;   // input features ("hidden size")
constexpr int kOut = 10;  // output classes

std::int64_t weight(int o, int i) {
  return (o * 31 + i * 17) % 13 - 6;
}

// Deterministic "embedding" of a prompt: the same on every rank.
std::vector<std::int64_t> embed(const std::string& prompt) {
  std::vector<std::int64_t> x(kIn);
  std::uint32_t h = 2166136261u;
  for (int i = 0; i < kIn; ++i) {
    for (unsigned char c : prompt) h = (h ^ c) * 16777619u;
    h = (h ^ static_cast<std::uint32_t>(i)) * 16777619u;
    x[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(h % 9) - 4;
  }
  return x;
}

struct Args {
  std::string prompts, out;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view k(argv[i]);
    if (k == "--prompts")
      a.prompts = argv[i + 1];
    else if (k == "--out")
      a.out = argv[i + 1];
    else
      throw spark::InvalidUsage("unknown option " + std::string(k));
  }
  if (argc % 2 != 1 || a.prompts.empty() || a.out.empty()) {
    throw spark::InvalidUsage("usage: sharded_infer --prompts FILE --out FILE");
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    spark::Communicator comm = spark::init();
    const int rank = comm.rank(), n = comm.size();
    const int lo = rank * kIn / n, hi = (rank + 1) * kIn / n;

    // "Load" this rank's shard (a real job reads its slice of the checkpoint here).
    std::vector<std::int64_t> shard(static_cast<std::size_t>(kOut * (hi - lo)));
    for (int o = 0; o < kOut; ++o)
      for (int i = lo; i < hi; ++i)
        shard[static_cast<std::size_t>(o * (hi - lo) + i - lo)] = weight(o, i);
    // Loading can take minutes and differ per rank: wait here (SPARK_BARRIER_TIMEOUT_MS) so
    // that SPARKNET_ROCE_TIMEOUT_MS only ever measures communication.
    comm.barrier();

    // Rank 0 reads the prompts and broadcasts them as one block of text.
    std::string text;
    if (rank == 0) {
      std::ifstream in(args.prompts);
      if (!in) throw spark::InvalidUsage("cannot read --prompts " + args.prompts);
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    std::int64_t bytes = static_cast<std::int64_t>(text.size());
    comm.broadcast(&bytes, 1, spark::DType::i64, 0);
    text.resize(static_cast<std::size_t>(bytes));
    if (bytes > 0) comm.broadcast(text.data(), text.size(), spark::DType::u8, 0);
    std::vector<std::string> prompts;
    for (std::size_t pos = 0; pos < text.size();) {
      std::size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      if (end > pos) prompts.push_back(text.substr(pos, end - pos));
      pos = end + 1;
    }

    // The batch: partial products from this shard, summed across ranks in one allreduce.
    std::vector<std::int64_t> y(prompts.size() * kOut, 0);
    for (std::size_t p = 0; p < prompts.size(); ++p) {
      const std::vector<std::int64_t> x = embed(prompts[p]);
      for (int o = 0; o < kOut; ++o) {
        std::int64_t acc = 0;
        for (int i = lo; i < hi; ++i)
          acc += shard[static_cast<std::size_t>(o * (hi - lo) + i - lo)] *
                 x[static_cast<std::size_t>(i)];
        y[p * kOut + static_cast<std::size_t>(o)] = acc;
      }
    }
    if (!y.empty())
      comm.allreduce(y.data(), y.data(), y.size(), spark::DType::i64, spark::ReduceOp::sum);
    std::printf("sharded_infer: rank %d of %d: shard columns %d-%d, %zu prompts\n", rank, n, lo,
                hi - 1, prompts.size());

    if (rank == 0) {
      std::ofstream out(args.out);
      int mismatches = 0;
      for (std::size_t p = 0; p < prompts.size(); ++p) {
        const std::vector<std::int64_t> x = embed(prompts[p]);
        const auto row = y.begin() + static_cast<std::ptrdiff_t>(p * kOut);
        for (int o = 0; o < kOut; ++o) {
          std::int64_t ref = 0;
          for (int i = 0; i < kIn; ++i) ref += weight(o, i) * x[static_cast<std::size_t>(i)];
          if (ref != row[o]) ++mismatches;
        }
        const auto best = std::max_element(row, row + kOut);
        out << p << '\t' << (best - row) << '\t' << *best << '\t' << prompts[p] << '\n';
      }
      out.close();
      if (!out || mismatches != 0) {
        std::fprintf(stderr, "sharded_infer: %d results differ from the unsharded layer\n",
                     mismatches);
        return 1;
      }
      std::printf(
          "sharded_infer: %zu prompts on %d shards match the unsharded layer; results in %s\n",
          prompts.size(), n, args.out.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sharded_infer: %s\n", e.what());
    return 1;
  }
}
