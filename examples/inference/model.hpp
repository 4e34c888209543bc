// A decoder-only transformer (RMSNorm, rotary attention, SiLU MLP) sharded Megatron-style:
// q/k/v and the MLP's up projection are column-parallel (each rank holds whole heads / a slice
// of the hidden units), the attention output and the MLP's down projection are row-parallel
// and end in one allreduce per block half.
//
// Bit-identical results for every rank count: the sharded dimension is cut into `blocks`
// fixed blocks (the same cut for 1, 2 or 3 ranks). A rank computes one partial sum per block
// it owns, in the same order as a single rank would, and places it in a [rows][blocks][dim]
// buffer that is zero elsewhere. The allreduce then only ever adds zeros to a partial (exact,
// whatever the reduction order), and every rank adds the blocks 0..blocks-1 in order
// afterwards. The price: the allreduce carries `blocks` times more data than Megatron's.
// `--reduce plain` sends one summed partial per rank instead (Megatron's volume; results then
// differ in the last bits between rank counts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "safetensors.hpp"

namespace spark::example {

struct ModelConfig {
  std::size_t vocab = 1024, dim = 384, heads = 12, ffn = 1536, layers = 4, blocks = 6;
  std::uint64_t seed = 1;
  std::size_t head_dim() const { return dim / heads; }
  /// Throws std::invalid_argument naming the rule that is broken.
  void validate() const;
  std::map<std::string, std::string> to_metadata() const;
  static ModelConfig from_metadata(const std::map<std::string, std::string>& m,
                                   const std::string& path);
};

/// Writes a random model (seeded, reproducible) to path.
void make_model(const ModelConfig& cfg, const std::string& path);

/// Sums `count` floats over all ranks, in place (the communicator's allreduce, or a no-op).
using AllreduceFn = std::function<void(float* data, std::size_t count)>;

class ShardedModel {
 public:
  /// Loads the weights of ranks's share: rank owns blocks [rank*B/size, (rank+1)*B/size).
  ShardedModel(const SafetensorsFile& file, int rank, int size, bool exact_reduce);
  const ModelConfig& config() const { return cfg_; }

  /// One forward step over `rows` tokens. tokens[t], positions[t] and slot[t] (the request's
  /// KV-cache slot) per row. Writes the KV cache, reads it for attention. For each row with
  /// want_logits[t], writes vocab logits to logits (in row order of those rows).
  void forward(const std::vector<int>& tokens, const std::vector<int>& positions,
               const std::vector<int>& slot, const std::vector<char>& want_logits,
               std::vector<float>& logits, const AllreduceFn& allreduce);
  /// Sizes the KV cache for `slots` requests of up to `max_len` tokens.
  void reset_cache(std::size_t slots, std::size_t max_len);

  /// The blocks [first_block(), end_block()) whose heads (and ffn units) this rank owns.
  std::size_t first_block() const { return block0_; }
  std::size_t end_block() const { return block1_; }
  /// KV-cache hand-off (disaggregated serving): the keys and values of `slot`, positions
  /// [0, len), heads of blocks [b0, b1) (a part of this rank's), laid out
  /// [layer][k, v][position][the blocks' heads x head_dim]. import_kv writes the same layout
  /// into a rank that owns those blocks too, possibly with another rank count.
  std::size_t kv_floats(std::size_t len, std::size_t b0, std::size_t b1) const;
  void export_kv(std::size_t slot, std::size_t len, std::size_t b0, std::size_t b1,
                 float* out) const;
  void import_kv(std::size_t slot, std::size_t len, std::size_t b0, std::size_t b1,
                 const float* in);

 private:
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, wo, mlp_norm, w_up, w_down;
    std::vector<float> k_cache, v_cache;  // [slot][pos][local q dim]
  };
  // The columns of a cache row that hold blocks [b0, b1); throws unless this rank owns them.
  std::pair<std::size_t, std::size_t> kv_columns(std::size_t b0, std::size_t b1) const;
  template <class Piece>
  void walk_kv(std::size_t slot, std::size_t len, std::size_t b0, std::size_t b1,
               Piece piece) const;
  void row_parallel(const std::vector<float>& in, std::size_t in_local, std::size_t rows,
                    const std::vector<float>& w, std::vector<float>& x,
                    const AllreduceFn& allreduce);

  ModelConfig cfg_;
  int rank_, size_;
  bool exact_;
  std::size_t block0_, block1_;  // owned blocks
  std::size_t lq_, lf_;          // local attention width (heads*head_dim), local ffn width
  std::vector<float> embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
  std::size_t slots_ = 0, max_len_ = 0;
  std::vector<float> red_;  // reduction buffer, reused
};

}  // namespace spark::example
