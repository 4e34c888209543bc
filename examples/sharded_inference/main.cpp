// Batch inference with a tensor-parallel transformer: reads requests (JSONL token ids), runs
// them in batches through prefill and greedy decode steps with a KV cache, writes JSONL. An
// output file is durable and resumable (results_file.hpp): a run after a failure skips the
// requests already done.
//   sharded_inference --make-model model.safetensors [--layers 4 --dim 384 ...]
//   sharded_inference --make-requests req.jsonl [--count 64 --prompt-len 32]
//   sparkrun -n 3 sharded_inference --model model.safetensors --input req.jsonl --output out.jsonl
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <spark/spark.hpp>

#include "model.hpp"
#include "requests.hpp"
#include "results_file.hpp"
#include "steps.hpp"
#ifdef SPARK_EXAMPLE_WITH_CUDA
#include "gpu_allreduce.hpp"
#endif

using spark::example::ModelConfig;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Rank 0, stderr: a bar on a terminal, else a plain line every `every` seconds; nothing when
// quiet. It starts at the requests already done (a resumed job); rates count this run's work.
class Progress {
 public:
  Progress(std::size_t total, std::size_t already_done, double every_s, bool quiet)
      : total_(total),
        start_(already_done),
        tty_(isatty(2) != 0),
        quiet_(quiet),
        every_(tty_ ? 0.1 : every_s),
        t0_(Clock::now()),
        last_(t0_) {
    if (!quiet_) draw(start_, 0, t0_);
  }
  void update(std::size_t done, std::size_t tokens) {
    const auto now = Clock::now();
    if (quiet_ || (done < total_ && seconds(now - last_) < every_)) return;
    last_ = now;
    draw(done, tokens, now);
  }

 private:
  void draw(std::size_t done, std::size_t tokens, Clock::time_point now) const {
    const double s = std::max(seconds(now - t0_), 1e-9);
    const double rate = static_cast<double>(done - start_) / s;
    const std::string eta = done == total_ ? "done"
                            : rate > 0     ? clock_text((total_ - done) / rate)
                                           : "?";
    if (tty_) {
      const int width = 30,
                fill = static_cast<int>(width * done / std::max<std::size_t>(total_, 1));
      std::fprintf(stderr, "\r[%s%s] %zu/%zu requests  %.0f tok/s  ETA %s   ",
                   std::string(static_cast<std::size_t>(fill), '#').c_str(),
                   std::string(static_cast<std::size_t>(width - fill), '.').c_str(), done, total_,
                   static_cast<double>(tokens) / s, eta.c_str());
      if (done == total_) std::fputc('\n', stderr);
    } else {
      std::fprintf(stderr, "progress: %zu/%zu requests, %.1f requests/s, %.0f tokens/s, ETA %s\n",
                   done, total_, rate, static_cast<double>(tokens) / s, eta.c_str());
    }
  }
  static std::string clock_text(double s) {
    const auto t = static_cast<long long>(s + 0.5);
    char b[32];
    std::snprintf(b, sizeof b, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
    return b;
  }
  std::size_t total_, start_;
  bool tty_, quiet_;
  double every_;
  Clock::time_point t0_, last_;
};

// The attempt sparkrun --max-restarts runs (0 on the first, and without sparkrun).
int attempt_number() {
  const char* v = std::getenv("SPARK_RESTART_COUNT");
  return v && *v ? std::atoi(v) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Tensor-parallel batch inference on libspark (see docs/examples/sharded_inference.md)"};
  std::string make_model_path, make_requests_path, model_path, input = "-", output = "-";
  std::string reduce = "exact", fsync_mode = "batch";
  bool restart_output = false, quiet = false;
  double progress_every = 2;
  ModelConfig cfg;
  std::size_t count = 64, prompt_len = 32, batch = 8, new_tokens = 16;
  app.add_option("--make-model", make_model_path,
                 "write a random model to this safetensors file and exit");
  app.add_option("--layers", cfg.layers, "with --make-model: decoder blocks")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--dim", cfg.dim, "with --make-model: model width")
      ->capture_default_str()
      ->check(CLI::Range(2, 65536));
  app.add_option("--heads", cfg.heads, "with --make-model: attention heads")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--ffn", cfg.ffn, "with --make-model: MLP hidden units")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--vocab", cfg.vocab, "with --make-model / --make-requests: vocabulary size")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  app.add_option(
         "--blocks", cfg.blocks,
         "with --make-model: fixed blocks of the sharded dimension; the rank count must divide it")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--seed", cfg.seed, "with --make-model / --make-requests: random seed")
      ->capture_default_str();
  app.add_option("--make-requests", make_requests_path,
                 "write random requests (JSONL) to this file and exit");
  app.add_option("--count", count, "with --make-requests: number of requests")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--prompt-len", prompt_len,
                 "with --make-requests: longest prompt (lengths vary from half of it)")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 16));
  app.add_option("--model", model_path, "safetensors model (from --make-model)");
  app.add_option("--input", input,
                 "requests, one JSON object per line: {\"id\": ..., \"prompt\": [ids]}; - = stdin")
      ->capture_default_str();
  app.add_option("--output", output,
                 "results (JSONL) written by rank 0; - = stdout. A file is resumed: an existing "
                 "one of the same job (FILE.job) keeps its results and the run skips them")
      ->capture_default_str();
  app.add_flag("--restart-output", restart_output,
               "discard an existing --output and start over (on a restarted attempt of sparkrun "
               "--max-restarts it still resumes this job's own progress)");
  app.add_option("--fsync", fsync_mode,
                 "batch: make results durable (fdatasync) after every batch; none: only write "
                 "them (a crash of the machine may lose recent batches)")
      ->capture_default_str()
      ->check(CLI::IsMember({"batch", "none"}));
  app.add_flag("--quiet", quiet, "no progress on stderr (the summary stays)");
  app.add_option("--progress-every", progress_every,
                 "seconds between progress lines when stderr is not a terminal")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--batch", batch, "requests per batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--new-tokens", new_tokens, "greedy decode steps per request")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--reduce", reduce,
                 "exact: per-block partials, bit-identical for every rank count; plain: Megatron's "
                 "volume, last bits may differ")
      ->capture_default_str()
      ->check(CLI::IsMember({"exact", "plain"}));
  CLI11_PARSE(app, argc, argv);

  try {
    if (!make_model_path.empty()) {
      spark::example::make_model(cfg, make_model_path);
      return 0;
    }
    if (!make_requests_path.empty()) {
      spark::example::make_requests(make_requests_path, count, prompt_len, cfg.vocab, cfg.seed);
      return 0;
    }
    if (model_path.empty())
      throw std::invalid_argument("--model is required (make one with --make-model PATH)");

    const auto t_init = Clock::now();
    auto comm = spark::init();
    const auto t_load = Clock::now();
    const double init_s = seconds(t_load - t_init);
    spark::example::SafetensorsFile file(model_path);
    spark::example::ShardedModel model(file, comm.rank(), comm.size(), reduce == "exact");
    const ModelConfig& mc = model.config();
    const std::string input_text = spark::example::share_input(comm, input);
    const auto requests = spark::example::parse_requests(input_text, mc.vocab);
    // Rank 0 opens (checks, repairs) the output (hashing the model can take long: before the
    // barrier, whose deadline is long) and tells every rank where to start; -1 says it
    // refused (and said why), and every rank ends.
    std::unique_ptr<spark::example::ResultsFile> results;
    std::int64_t first = 0;
    if (comm.rank() == 0 && output != "-") {
      try {
        spark::example::JobRecord job{"sharded_inference",
                                      spark::example::sha256_file_hex(model_path),
                                      spark::example::sha256_hex(input_text),
                                      requests.size(),
                                      new_tokens,
                                      reduce,
                                      reduce == "plain" ? comm.size() : 0};
        const auto existing = !restart_output ? spark::example::ExistingOutput::resume
                              : attempt_number() == 0
                                  ? spark::example::ExistingOutput::start_over
                                  : spark::example::ExistingOutput::resume_if_same;
        results = std::make_unique<spark::example::ResultsFile>(
            output, job, existing,
            [&](std::size_t i, const std::string& line) {
              return spark::example::is_result_line(requests[i], new_tokens, line);
            },
            [](const std::string& note) {
              std::fprintf(stderr, "sharded_inference: %s\n", note.c_str());
            });
        first = static_cast<std::int64_t>(results->done());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sharded_inference: error: %s\n", e.what());
        first = -1;
      }
      if (first > 0)
        std::fprintf(stderr, "sharded_inference: resuming '%s': %lld of %zu requests done\n",
                     output.c_str(), static_cast<long long>(first), requests.size());
    }
    comm.barrier();  // loading is skewed between ranks; the communication timeout starts here
    const double load_s = seconds(Clock::now() - t_load);
    comm.broadcast(&first, 1, spark::DType::i64, 0);
    if (first < 0) return comm.rank() == 0 ? 1 : 0;  // rank 0's status reports the refusal

    Clock::duration in_coll{};
    std::size_t n_allreduce = 0, bytes = 0;
    const char* path = "host";
#ifdef SPARK_EXAMPLE_WITH_CUDA
    // The largest allreduce: a batch's prefill rows x blocks x dim.
    std::size_t max_rows = batch;
    for (std::size_t b0 = 0; b0 < requests.size(); b0 += batch) {
      std::size_t rows = 0;
      for (std::size_t i = b0; i < std::min(b0 + batch, requests.size()); ++i)
        rows += requests[i].prompt.size();
      max_rows = std::max(max_rows, rows);
    }
    auto gpu = spark::example::GpuAllreduce::try_create(
        comm, max_rows * (reduce == "exact" ? mc.blocks : 1) * mc.dim);
    if (gpu) path = "GPU (device buffers, spark::cuda::DeviceComm)";
#endif
    spark::example::AllreduceFn allreduce = [&](float* d, std::size_t n) {
      const auto t = Clock::now();
#ifdef SPARK_EXAMPLE_WITH_CUDA
      if (gpu)
        (*gpu)(d, n);
      else
#endif
        comm.allreduce(d, d, n, spark::DType::f32, spark::ReduceOp::sum);
      in_coll += Clock::now() - t;
      ++n_allreduce;
      bytes += n * sizeof(float);
    };
    if (comm.rank() == 0) std::fprintf(stderr, "sharded_inference: allreduce on %s\n", path);

    const auto start = static_cast<std::size_t>(first);
    Progress progress(requests.size(), start, progress_every, quiet || comm.rank() != 0);
    const auto t0 = Clock::now();
    std::size_t prompt_tokens = 0, gen_tokens = 0;
    std::vector<float> logits;
    for (std::size_t b0 = start; b0 < requests.size(); b0 += batch) {
      const std::size_t nb = std::min(batch, requests.size() - b0);
      const std::size_t max_len = spark::example::longest_prompt(requests, b0, nb);
      model.reset_cache(nb, max_len + new_tokens);
      // Prefill: every prompt token of the batch in one step; logits of each last token.
      auto rows = spark::example::prefill_rows(requests, b0, nb);
      prompt_tokens += rows.tokens.size();
      std::vector<std::vector<int>> gen(nb);
      std::vector<int> last(nb);
      std::vector<std::uint64_t> hash(nb, spark::example::kFnvOffset);
      for (std::size_t step = 0;; ++step) {
        model.forward(rows.tokens, rows.positions, rows.slots, rows.want_logits, logits, allreduce);
        for (std::size_t i = 0; i < nb; ++i) {
          const float* l = logits.data() + i * mc.vocab;
          hash[i] = spark::example::fnv(hash[i], l, mc.vocab);
          gen[i].push_back(last[i] = spark::example::greedy(l, mc.vocab));
        }
        gen_tokens += nb;
        if (step + 1 == new_tokens) break;
        rows = spark::example::decode_rows(requests, b0, last, step + 1);  // one row a request
      }
      if (comm.rank() == 0) {
        std::string lines;
        for (std::size_t i = 0; i < nb; ++i)
          lines += spark::example::result_line(requests[b0 + i].id, gen[i], hash[i]) + '\n';
        if (results) {
          results->append(lines, nb);
          results->commit(fsync_mode == "batch");
        } else {
          std::cout << lines << std::flush;
        }
        progress.update(b0 + nb, prompt_tokens + gen_tokens);
      }
    }
    const double total = seconds(Clock::now() - t0), coll = seconds(in_coll);
    if (comm.rank() == 0) {
      const std::size_t ran = requests.size() - start;
      const double n = static_cast<double>(ran), t = std::max(total, 1e-9);
      const std::string resumed =
          start > 0 ? " (" + std::to_string(start) + " more were done before)" : "";
      std::fprintf(stderr,
                   "summary: %zu requests on %d ranks%s in %.3f s (init %.3f s, load %.3f s): %.1f "
                   "requests/s, "
                   "%.0f generated tokens/s, %.0f tokens/s with prompts\n"
                   "summary: rank 0 time: compute %.3f s (%.0f%%), collectives %.3f s (%.0f%%): "
                   "%zu allreduces, %.1f MB (--reduce %s)\n",
                   ran, comm.size(), resumed.c_str(), total, init_s, load_s, n / t,
                   static_cast<double>(gen_tokens) / t,
                   static_cast<double>(gen_tokens + prompt_tokens) / t, total - coll,
                   100.0 * (total - coll) / t, coll, 100.0 * coll / t, n_allreduce,
                   static_cast<double>(bytes) / 1e6, reduce.c_str());
    }
    return 0;
  } catch (const spark::CommFailure& e) {
    std::fprintf(stderr, "sharded_inference: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sharded_inference: error: %s\n", e.what());
    return 1;
  }
}
