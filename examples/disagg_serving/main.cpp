// Disaggregated serving (prefill and decode on different ranks, as NVIDIA Dynamo serves): the
// world is split into a prefill group and a decode group, each tensor-parallel inside itself.
// Prefill ranks run a batch's prompts, then hand each request's KV cache (the heads they own)
// to the decode ranks that own those heads, with send/recv over the world communicator; the
// decode group generates. Same model, requests and results as sharded_inference, bit for bit.
//   sparkrun -n 3 disagg_serving --prefill 1 --decode 2 --model m.safetensors --input req.jsonl
#include <csignal>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <spark/spark.hpp>

#include "model.hpp"
#include "requests.hpp"
#include "steps.hpp"

namespace ex = spark::example;
using Clock = std::chrono::steady_clock;
// The start every rank measures "time to first token" from: world rank 0's wall clock after the
// barrier (broadcast), so that the prefill's and the decode's instants are on one time line
// (one clock on one host; across hosts, plus their PTP/NTP offset).
using Wall = std::chrono::system_clock;

namespace {

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}
double since(Wall::time_point t0) {
  return std::chrono::duration<double>(Wall::now() - t0).count();
}

// The world's layout: ranks [0, prefill) prefill, [prefill, prefill + decode) decode.
struct Layout {
  int prefill = 0, decode = 0;
  bool is_decode(int world_rank) const { return world_rank >= prefill; }
  // Blocks [b0, b1) rank r of a group of n owns: the same rule as ShardedModel's.
  static std::pair<std::size_t, std::size_t> blocks(int r, int n, std::size_t B) {
    return {static_cast<std::size_t>(r) * B / static_cast<std::size_t>(n),
            static_cast<std::size_t>(r + 1) * B / static_cast<std::size_t>(n)};
  }
};

// Before each KV message: which request, the first token and the logits hash after it (the
// prefill group computed both; every prefill rank has the same).
struct KvHeader {
  std::int64_t request, first_token, logits_fnv;
};
constexpr std::size_t kHeaderWords = sizeof(KvHeader) / sizeof(std::int64_t);

// Per request, what the hand-off cost; filled where it is measured and combined at the end.
struct Costs {
  std::vector<double> first_token_s;  // prefill: first token computed (from the start)
  std::vector<double> transfer_s;     // decode: first header in to last KV byte in (max)
  std::vector<double> ready_s;        // decode: token and whole KV cache held (time to first token)
  std::vector<double> bytes;          // KV bytes moved (sum over decode ranks)
  explicit Costs(std::size_t n) : first_token_s(n), transfer_s(n), ready_s(n), bytes(n) {}
};

struct Options {
  std::string model, input = "-", output = "-";
  std::size_t batch = 8, new_tokens = 16;
  int stop_rank = -1;  // fault injection: this decode rank stops in its first KV receive
};

// The tensor-parallel sum inside one group (the model's allreduce hook).
ex::AllreduceFn sum_within(spark::Communicator& group) {
  return [&group](float* d, std::size_t n) {
    group.allreduce(d, d, n, spark::DType::f32, spark::ReduceOp::sum);
  };
}

void prefill(spark::Communicator& world, spark::Communicator& group, ex::ShardedModel& model,
             const Layout& lay, const std::vector<ex::Request>& requests, const Options& o,
             const Wall::time_point t0, Costs& costs) {
  const auto& mc = model.config();
  const ex::AllreduceFn allreduce = sum_within(group);
  std::vector<float> logits, kv;
  for (std::size_t b0 = 0; b0 < requests.size(); b0 += o.batch) {
    const std::size_t nb = std::min(o.batch, requests.size() - b0);
    const std::size_t max_len = ex::longest_prompt(requests, b0, nb);
    model.reset_cache(nb, max_len);
    const auto rows = ex::prefill_rows(requests, b0, nb);
    model.forward(rows.tokens, rows.positions, rows.slots, rows.want_logits, logits, allreduce);
    for (std::size_t i = 0; i < nb; ++i) {
      const float* l = logits.data() + i * mc.vocab;
      const KvHeader h{static_cast<std::int64_t>(b0 + i), ex::greedy(l, mc.vocab),
                       static_cast<std::int64_t>(ex::fnv(ex::kFnvOffset, l, mc.vocab))};
      costs.first_token_s[b0 + i] = since(t0);
      const std::size_t len = requests[b0 + i].prompt.size();
      for (int d = 0; d < lay.decode; ++d) {  // in decode rank order (see docs: no deadlock)
        const auto [d0, d1] = Layout::blocks(d, lay.decode, mc.blocks);
        const std::size_t o0 = std::max(d0, model.first_block()),
                          o1 = std::min(d1, model.end_block());
        if (o0 >= o1) continue;  // that decode rank owns none of our heads
        kv.resize(model.kv_floats(len, o0, o1));
        model.export_kv(i, len, o0, o1, kv.data());
        world.send(&h, kHeaderWords, spark::DType::i64, lay.prefill + d);
        world.send(kv.data(), kv.size(), spark::DType::f32, lay.prefill + d);
      }
    }
  }
}

void decode(spark::Communicator& world, spark::Communicator& group, ex::ShardedModel& model,
            const Layout& lay, const std::vector<ex::Request>& requests, const Options& o,
            const Wall::time_point t0, Costs& costs, std::ostream* out) {
  const auto& mc = model.config();
  const ex::AllreduceFn allreduce = sum_within(group);
  std::vector<float> logits, kv;
  for (std::size_t b0 = 0; b0 < requests.size(); b0 += o.batch) {
    const std::size_t nb = std::min(o.batch, requests.size() - b0);
    const std::size_t max_len = ex::longest_prompt(requests, b0, nb);
    model.reset_cache(nb, max_len + o.new_tokens);
    std::vector<std::vector<int>> gen(nb);
    std::vector<int> last(nb);
    std::vector<std::uint64_t> hash(nb);
    for (std::size_t i = 0; i < nb; ++i) {
      const std::size_t r = b0 + i, len = requests[r].prompt.size();
      std::optional<Clock::time_point> first_in;
      for (int p = 0; p < lay.prefill; ++p) {  // in prefill rank order
        const auto [p0, p1] = Layout::blocks(p, lay.prefill, mc.blocks);
        const std::size_t o0 = std::max(p0, model.first_block()),
                          o1 = std::min(p1, model.end_block());
        if (o0 >= o1) continue;
        KvHeader h{};
        world.recv(&h, kHeaderWords, spark::DType::i64, p);
        if (!first_in) first_in = Clock::now();
        if (h.request != static_cast<std::int64_t>(r))
          throw std::runtime_error("prefill rank " + std::to_string(p) + " sent request " +
                                   std::to_string(h.request) + ", expected " + std::to_string(r));
        last[i] = static_cast<int>(h.first_token);
        hash[i] = static_cast<std::uint64_t>(h.logits_fnv);
        if (r == 0 && world.rank() == o.stop_rank) {
          std::fprintf(stderr,
                       "disagg_serving: rank %d stops itself (SIGSTOP) while receiving "
                       "the KV cache of request 0\n",
                       o.stop_rank);
          std::raise(SIGSTOP);
        }
        kv.resize(model.kv_floats(len, o0, o1));
        world.recv(kv.data(), kv.size(), spark::DType::f32, p);
        model.import_kv(i, len, o0, o1, kv.data());
        costs.bytes[r] += static_cast<double>(kv.size() * sizeof(float));
      }
      const auto ready = Clock::now();
      costs.transfer_s[r] = seconds(ready - *first_in);
      costs.ready_s[r] = since(t0);
      gen[i].push_back(last[i]);
    }
    for (std::size_t step = 1; step < o.new_tokens; ++step) {
      const auto rows = ex::decode_rows(requests, b0, last, step);
      model.forward(rows.tokens, rows.positions, rows.slots, rows.want_logits, logits, allreduce);
      for (std::size_t i = 0; i < nb; ++i) {
        const float* l = logits.data() + i * mc.vocab;
        hash[i] = ex::fnv(hash[i], l, mc.vocab);
        gen[i].push_back(last[i] = ex::greedy(l, mc.vocab));
      }
    }
    if (out) {
      for (std::size_t i = 0; i < nb; ++i)
        *out << ex::result_line(requests[b0 + i].id, gen[i], hash[i]) << '\n';
      out->flush();
    }
  }
}

void report(const Layout& lay, const std::vector<ex::Request>& requests, const Costs& c,
            double total_s, std::size_t new_tokens) {
  const std::size_t n = requests.size();
  double bytes = 0, transfer = 0;
  std::vector<double> ttft(c.ready_s);
  for (std::size_t r = 0; r < n; ++r) {
    std::fprintf(stderr,
                 "request %s: prompt %zu tokens, KV %.1f KB moved in %.3f ms (%.2f GB/s), first "
                 "token at prefill %.2f ms, on decode (with its KV) %.2f ms\n",
                 requests[r].id.dump().c_str(), requests[r].prompt.size(), c.bytes[r] / 1e3,
                 c.transfer_s[r] * 1e3, c.bytes[r] / std::max(c.transfer_s[r], 1e-12) / 1e9,
                 c.first_token_s[r] * 1e3, c.ready_s[r] * 1e3);
    bytes += c.bytes[r];
    transfer += c.transfer_s[r];
  }
  std::sort(ttft.begin(), ttft.end());
  std::fprintf(stderr,
               "summary: %zu requests on %d ranks (prefill %d, decode %d) in %.3f s: %.1f "
               "requests/s, %.0f generated tokens/s\n"
               "summary: KV hand-off %.3f MB in all, %.1f KB and %.3f ms per request on average "
               "(%.2f GB/s); time to first token p50 %.2f ms, max %.2f ms\n",
               n, lay.prefill + lay.decode, lay.prefill, lay.decode, total_s,
               static_cast<double>(n) / total_s, static_cast<double>(n * new_tokens) / total_s,
               bytes / 1e6, bytes / 1e3 / static_cast<double>(n),
               transfer * 1e3 / static_cast<double>(n), bytes / std::max(transfer, 1e-12) / 1e9,
               ttft[n / 2] * 1e3, ttft[n - 1] * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Disaggregated prefill/decode serving on libspark "
      "(see docs/examples/disagg_serving.md)"};
  Options o;
  int prefill_n = 0, decode_n = 0;
  app.add_option("--model", o.model, "safetensors model (sharded_inference --make-model)")
      ->required();
  app.add_option("--input", o.input,
                 "requests, one JSON object per line: {\"id\": ..., \"prompt\": [ids]}; - = stdin")
      ->capture_default_str();
  app.add_option("--output", o.output,
                 "results (JSONL) written by the first decode rank; - = stdout")
      ->capture_default_str();
  app.add_option("--prefill", prefill_n,
                 "prefill ranks (default: the ranks --decode leaves, else 1)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--decode", decode_n, "decode ranks (default: the ranks --prefill leaves)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--batch", o.batch, "requests per batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--new-tokens", o.new_tokens, "greedy tokens per request (the first from prefill)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--stop-in-kv-recv", o.stop_rank,
                 "fault injection: this (decode) rank stops itself with SIGSTOP while receiving "
                 "the first KV cache")
      ->check(CLI::Range(0, 4096));
  CLI11_PARSE(app, argc, argv);

  try {
    auto world = spark::init();
    const int n = world.size();
    Layout lay;
    lay.prefill = prefill_n ? prefill_n : (decode_n ? n - decode_n : 1);
    lay.decode = decode_n ? decode_n : n - lay.prefill;
    if (lay.prefill < 1 || lay.decode < 1 || lay.prefill + lay.decode != n)
      throw std::invalid_argument(
          "--prefill " + std::to_string(lay.prefill) + " --decode " + std::to_string(lay.decode) +
          " do not fill the " + std::to_string(n) +
          " ranks: both groups need a rank and together all of them (e.g. sparkrun -n " +
          std::to_string(std::max(lay.prefill, 1) + std::max(lay.decode, 1)) + ")");
    if (o.stop_rank >= 0 && !lay.is_decode(o.stop_rank))
      throw std::invalid_argument("--stop-in-kv-recv " + std::to_string(o.stop_rank) +
                                  " is not a decode rank (those are " +
                                  std::to_string(lay.prefill) + ".." + std::to_string(n - 1) + ")");
    const bool is_decode = lay.is_decode(world.rank());
    {
      auto group = world.split(is_decode ? 1 : 0, world.rank());
      ex::SafetensorsFile file(o.model);
      std::optional<ex::ShardedModel> model;
      try {
        model.emplace(file, group->rank(), group->size(), true);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string(is_decode ? "decode" : "prefill") + " group of " +
                                    std::to_string(group->size()) + ": " + e.what());
      }
      const auto requests =
          ex::parse_requests(ex::share_input(world, o.input), model->config().vocab);
      if (requests.empty()) throw std::invalid_argument("no requests in " + o.input);
      std::ofstream out_file;
      std::ostream* out = nullptr;
      if (world.rank() == lay.prefill) {  // the first decode rank writes the results
        out = &std::cout;
        if (o.output != "-") {
          out_file.open(o.output, std::ios::trunc);
          if (!out_file) throw std::invalid_argument("cannot create '" + o.output + "'");
          out = &out_file;
        }
      }
      world.barrier();  // loading is skewed; the communication timeout starts here
      const auto start = Clock::now();
      std::int64_t t0_ns = Wall::now().time_since_epoch() / std::chrono::nanoseconds(1);
      world.broadcast(&t0_ns, 1, spark::DType::i64, 0);
      const Wall::time_point t0{
          std::chrono::duration_cast<Wall::duration>(std::chrono::nanoseconds(t0_ns))};
      Costs costs(requests.size());
      if (is_decode)
        decode(world, *group, *model, lay, requests, o, t0, costs, out);
      else
        prefill(world, *group, *model, lay, requests, o, t0, costs);
      const double total_s = seconds(Clock::now() - start);
      // Each rank measured its part; the first decode rank reports the whole.
      const std::size_t nr = requests.size();
      for (auto* v : {&costs.first_token_s, &costs.transfer_s, &costs.ready_s})
        world.allreduce(v->data(), v->data(), nr, spark::DType::f64, spark::ReduceOp::max);
      world.allreduce(costs.bytes.data(), costs.bytes.data(), nr, spark::DType::f64,
                      spark::ReduceOp::sum);
      if (world.rank() == lay.prefill) report(lay, requests, costs, total_s, o.new_tokens);
    }  // the group communicator goes before the world
    return 0;
  } catch (const spark::CommFailure& e) {
    std::fprintf(stderr, "disagg_serving: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "disagg_serving: error: %s\n", e.what());
    return 1;
  }
}
