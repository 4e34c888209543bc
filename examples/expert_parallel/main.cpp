// Expert parallelism (mixture of experts): each rank holds experts/size experts; every step,
// each rank routes its tokens (top-1 gate) to the rank of their expert with alltoallv, that
// rank runs the expert's MLP, and a second alltoallv brings the results back.
//   sparkrun -n 3 expert_parallel --tokens 4096 --experts 6 --steps 5 --check
// Weights and tokens come from a seed, so any rank count computes the same numbers; --check
// makes rank 0 recompute every step alone and compare bit for bit.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <spark/spark.hpp>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

struct Params {
  std::size_t tokens = 3072, dim = 128, experts = 6, ffn = 256, steps = 5;
  std::uint64_t seed = 1;
};

std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Deterministic values from (seed, stream): the same on every rank whatever the rank count.
void fill(std::vector<float>& v, std::uint64_t stream, float scale) {
  std::uint64_t s = mix(stream);
  for (auto& x : v) {
    s = mix(s);
    x = scale * (static_cast<float>(s >> 40) / static_cast<float>(1 << 24) * 2.f - 1.f);
  }
}

struct Expert {
  std::vector<float> w1, w2;  // [ffn][dim], [dim][ffn]
};

Expert make_expert(const Params& p, std::size_t e) {
  Expert x{std::vector<float>(p.ffn * p.dim), std::vector<float>(p.dim * p.ffn)};
  fill(x.w1, p.seed * 1000003 + 2 * e + 1, 1.f / std::sqrt(static_cast<float>(p.dim)));
  fill(x.w2, p.seed * 1000003 + 2 * e + 2, 1.f / std::sqrt(static_cast<float>(p.ffn)));
  return x;
}

void token(const Params& p, std::size_t step, std::size_t i, float* out) {
  std::vector<float> v(p.dim);
  fill(v, (p.seed << 40) ^ (step << 32) ^ (i + 7), 1.f);
  std::memcpy(out, v.data(), p.dim * sizeof(float));
}

// Top-1 routing: the expert with the largest gate logit, weighted by its softmax probability.
void route(const Params& p, const std::vector<float>& gate, const float* x, int& expert,
           float& weight) {
  std::vector<float> l(p.experts);
  for (std::size_t e = 0; e < p.experts; ++e) {
    float s = 0.f;
    for (std::size_t k = 0; k < p.dim; ++k) s += gate[e * p.dim + k] * x[k];
    l[e] = s;
  }
  std::size_t best = 0;
  for (std::size_t e = 1; e < p.experts; ++e)
    if (l[e] > l[best]) best = e;
  float sum = 0.f;
  for (std::size_t e = 0; e < p.experts; ++e) sum += std::exp(l[e] - l[best]);
  expert = static_cast<int>(best);
  weight = 1.f / sum;
}

void run_expert(const Params& p, const Expert& ex, const float* x, float* y) {
  std::vector<float> h(p.ffn);
  for (std::size_t j = 0; j < p.ffn; ++j) {
    float s = 0.f;
    for (std::size_t k = 0; k < p.dim; ++k) s += ex.w1[j * p.dim + k] * x[k];
    h[j] = s / (1.f + std::exp(-s));  // SiLU
  }
  for (std::size_t i = 0; i < p.dim; ++i) {
    float s = 0.f;
    for (std::size_t j = 0; j < p.ffn; ++j) s += ex.w2[i * p.ffn + j] * h[j];
    y[i] = s;
  }
}

std::uint64_t fnv(std::uint64_t h, const std::vector<float>& v) {
  const auto* b = reinterpret_cast<const unsigned char*>(v.data());
  for (std::size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Mixture-of-experts layer with experts spread over ranks (alltoallv routing); see "
      "docs/examples/expert_parallel.md"};
  Params p;
  bool check = false;
  app.add_option("--tokens", p.tokens,
                 "tokens per step, all ranks together (a multiple of the rank count)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--dim", p.dim, "token width")->capture_default_str()->check(CLI::Range(1, 65536));
  app.add_option("--experts", p.experts, "experts (a multiple of the rank count)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--ffn", p.ffn, "hidden units per expert")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--steps", p.steps, "steps (each routes every token there and back)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--seed", p.seed, "seed of weights and tokens")->capture_default_str();
  app.add_flag("--check", check, "rank 0 recomputes every step alone and compares bit for bit");
  CLI11_PARSE(app, argc, argv);
  try {
    auto comm = spark::init();
    const auto P = static_cast<std::size_t>(comm.size()),
               me = static_cast<std::size_t>(comm.rank());
    if (p.experts % P != 0 || p.tokens % P != 0)
      throw std::invalid_argument("--experts (" + std::to_string(p.experts) + ") and --tokens (" +
                                  std::to_string(p.tokens) +
                                  ") must be multiples of the rank count " + std::to_string(P));
    const std::size_t epr = p.experts / P, tpr = p.tokens / P, D = p.dim;
    std::vector<float> gate(p.experts * D);
    fill(gate, p.seed * 7919, 1.f / std::sqrt(static_cast<float>(D)));
    std::vector<Expert> mine;
    for (std::size_t e = me * epr; e < (me + 1) * epr; ++e) mine.push_back(make_expert(p, e));
    std::vector<Expert> all;  // rank 0 with --check: every expert, for the single-rank reference
    if (check && me == 0)
      for (std::size_t e = 0; e < p.experts; ++e) all.push_back(make_expert(p, e));
    comm.barrier();

    std::vector<float> x(tpr * D), send(tpr * D), back(tpr * D), out(tpr * D),
        everything(p.tokens * D);
    std::vector<float> recv, result;
    std::vector<int> expert(tpr), send_e(tpr), recv_e;
    std::vector<float> weight(tpr);
    std::vector<std::size_t> order(tpr);
    std::vector<std::size_t> sc(P), sd(P), rc(P), rd(P), scD(P), sdD(P), rcD(P), rdD(P);
    Clock::duration t_a2a{}, t_total{};
    std::uint64_t hash = 0xcbf29ce484222325ULL;
    std::size_t mismatches = 0, max_load = 0;
    for (std::size_t step = 0; step < p.steps; ++step) {
      for (std::size_t i = 0; i < tpr; ++i) token(p, step, me * tpr + i, &x[i * D]);
      const auto t0 = Clock::now();
      Clock::duration a2a{};
      auto timed = [&](auto&& f) {
        const auto t = Clock::now();
        f();
        a2a += Clock::now() - t;
      };
      // Route, and pack tokens by destination rank (stable: the way back restores the order).
      std::fill(sc.begin(), sc.end(), 0);
      for (std::size_t i = 0; i < tpr; ++i) {
        route(p, gate, &x[i * D], expert[i], weight[i]);
        ++sc[static_cast<std::size_t>(expert[i]) / epr];
      }
      for (std::size_t r = 1; r < P; ++r) sd[r] = sd[r - 1] + sc[r - 1];
      std::vector<std::size_t> fillp(sd);
      for (std::size_t i = 0; i < tpr; ++i) {
        const std::size_t slot = fillp[static_cast<std::size_t>(expert[i]) / epr]++;
        order[i] = slot;
        send_e[slot] = expert[i];
        std::memcpy(&send[slot * D], &x[i * D], D * sizeof(float));
      }
      timed([&] { comm.alltoall(sc.data(), rc.data(), 1, spark::DType::i64); });
      std::size_t nrecv = 0;
      for (std::size_t r = 0; r < P; ++r) {
        rd[r] = nrecv;
        nrecv += rc[r];
        scD[r] = sc[r] * D, sdD[r] = sd[r] * D, rcD[r] = rc[r] * D, rdD[r] = rd[r] * D;
      }
      max_load = std::max(max_load, nrecv);
      recv.resize(nrecv * D);
      result.resize(nrecv * D);
      recv_e.resize(nrecv);
      timed([&] {
        comm.alltoallv(send_e.data(), sc.data(), sd.data(), recv_e.data(), rc.data(), rd.data(),
                       spark::DType::i32);
        comm.alltoallv(send.data(), scD.data(), sdD.data(), recv.data(), rcD.data(), rdD.data(),
                       spark::DType::f32);
      });
      for (std::size_t j = 0; j < nrecv; ++j) {
        const auto e = static_cast<std::size_t>(recv_e[j]);
        if (e / epr != me)
          throw std::logic_error("token for expert " + std::to_string(e) + " arrived at rank " +
                                 std::to_string(me));
        run_expert(p, mine[e - me * epr], &recv[j * D], &result[j * D]);
      }
      timed([&] {  // and back: the counts swap roles
        comm.alltoallv(result.data(), rcD.data(), rdD.data(), back.data(), scD.data(), sdD.data(),
                       spark::DType::f32);
      });
      for (std::size_t i = 0; i < tpr; ++i)
        for (std::size_t k = 0; k < D; ++k) out[i * D + k] = weight[i] * back[order[i] * D + k];
      t_total += Clock::now() - t0;
      t_a2a += a2a;
      comm.allgather(out.data(), everything.data(), tpr * D, spark::DType::f32);  // not timed
      hash = fnv(hash, everything);
      if (check && me == 0) {
        std::vector<float> xr(D), yr(D);
        for (std::size_t i = 0; i < p.tokens; ++i) {
          token(p, step, i, xr.data());
          int e;
          float w;
          route(p, gate, xr.data(), e, w);
          run_expert(p, all[static_cast<std::size_t>(e)], xr.data(), yr.data());
          for (std::size_t k = 0; k < D; ++k)
            if (std::memcmp(&everything[i * D + k], &(yr[k] = w * yr[k]), sizeof(float)) != 0)
              ++mismatches;
        }
      }
    }
    if (me == 0) {
      const double tot = seconds(t_total), a = seconds(t_a2a);
      std::printf(
          "expert_parallel: %zu ranks, %zu experts, %zu tokens x %zu steps: %.0f tokens/s; "
          "alltoallv %.3f s of %.3f s (%.0f%%) on rank 0; busiest rank took %zu tokens in a step\n",
          P, p.experts, p.tokens, p.steps, static_cast<double>(p.tokens * p.steps) / tot, a, tot,
          100.0 * a / tot, max_load);
      std::printf("checksum: %016llx\n", static_cast<unsigned long long>(hash));
      if (check) {
        if (mismatches != 0) {
          std::printf("check: FAILED: %zu values differ from the single-rank computation\n",
                      mismatches);
          return 1;
        }
        std::printf("check: identical to the single-rank computation (%zu tokens x %zu steps)\n",
                    p.tokens, p.steps);
      }
    }
    return 0;
  } catch (const spark::CommFailure& e) {
    std::fprintf(stderr, "expert_parallel: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "expert_parallel: error: %s\n", e.what());
    return 1;
  }
}
