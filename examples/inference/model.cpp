#include "model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace spark::example {
namespace {

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::vector<float> random_tensor(std::size_t n, float scale, std::uint64_t& s) {
  std::vector<float> v(n);
  for (auto& x : v)
    x = scale * (static_cast<float>(splitmix(s) >> 40) / static_cast<float>(1 << 24) * 2.f - 1.f);
  return v;
}

std::size_t parse_size(const std::map<std::string, std::string>& m, const std::string& key,
                       const std::string& path) {
  auto it = m.find(key);
  if (it == m.end())
    throw std::invalid_argument(path + ": metadata lacks '" + key +
                                "' (not made by --make-model?)");
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(it->second, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos == 0 || pos != it->second.size() || it->second[0] == '-')
    throw std::invalid_argument(path + ": metadata '" + key + "' = '" + it->second +
                                "' is not a number");
  return static_cast<std::size_t>(v);
}

void rmsnorm(const float* x, const float* w, float* out, std::size_t n) {
  float ss = 0.f;
  for (std::size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.f / std::sqrt(ss / static_cast<float>(n) + 1e-5f);
  for (std::size_t i = 0; i < n; ++i) out[i] = x[i] * inv * w[i];
}

// out[r][j] = sum_k w[j][k] * in[r][k], k in order (w row-major [out_n][in_n]).
void matmul(const float* in, std::size_t rows, const float* w, std::size_t out_n, std::size_t in_n,
            float* out) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* a = in + r * in_n;
    for (std::size_t j = 0; j < out_n; ++j) {
      const float* wr = w + j * in_n;
      float s = 0.f;
      for (std::size_t k = 0; k < in_n; ++k) s += wr[k] * a[k];
      out[r * out_n + j] = s;
    }
  }
}

void rope(float* v, std::size_t heads, std::size_t hd, int pos) {
  for (std::size_t h = 0; h < heads; ++h)
    for (std::size_t i = 0; i + 1 < hd; i += 2) {
      const float theta = static_cast<float>(pos) *
                          std::pow(10000.f, -static_cast<float>(i) / static_cast<float>(hd));
      const float c = std::cos(theta), s = std::sin(theta);
      float* p = v + h * hd + i;
      const float a = p[0], b = p[1];
      p[0] = a * c - b * s;
      p[1] = a * s + b * c;
    }
}

}  // namespace

void ModelConfig::validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("model: " + what);
  };
  need(vocab >= 2 && dim >= 2 && heads >= 1 && ffn >= 1 && layers >= 1 && blocks >= 1,
       "vocab, dim, heads, ffn, layers and blocks must be positive (vocab >= 2)");
  need(dim % heads == 0, "dim must be a multiple of heads");
  need(head_dim() % 2 == 0, "dim/heads must be even (rotary embeddings rotate pairs)");
  need(heads % blocks == 0, "heads must be a multiple of blocks");
  need(ffn % blocks == 0, "ffn must be a multiple of blocks");
}

std::map<std::string, std::string> ModelConfig::to_metadata() const {
  return {{"vocab", std::to_string(vocab)},   {"dim", std::to_string(dim)},
          {"heads", std::to_string(heads)},   {"ffn", std::to_string(ffn)},
          {"layers", std::to_string(layers)}, {"blocks", std::to_string(blocks)},
          {"seed", std::to_string(seed)},     {"format", "sparkrun-sharded-inference-1"}};
}

ModelConfig ModelConfig::from_metadata(const std::map<std::string, std::string>& m,
                                       const std::string& path) {
  ModelConfig c;
  c.vocab = parse_size(m, "vocab", path);
  c.dim = parse_size(m, "dim", path);
  c.heads = parse_size(m, "heads", path);
  c.ffn = parse_size(m, "ffn", path);
  c.layers = parse_size(m, "layers", path);
  c.blocks = parse_size(m, "blocks", path);
  c.validate();
  return c;
}

void make_model(const ModelConfig& cfg, const std::string& path) {
  cfg.validate();
  std::uint64_t s = cfg.seed;
  const std::size_t D = cfg.dim, F = cfg.ffn;
  const float sd = 1.f / std::sqrt(static_cast<float>(D)),
              sf = 1.f / std::sqrt(static_cast<float>(F));
  std::vector<NamedTensor> t;
  t.push_back({"embed", {cfg.vocab, D}, random_tensor(cfg.vocab * D, 1.f, s)});
  for (std::size_t l = 0; l < cfg.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    t.push_back({p + "attn_norm", {D}, std::vector<float>(D, 1.f)});
    t.push_back({p + "wq", {D, D}, random_tensor(D * D, sd, s)});
    t.push_back({p + "wk", {D, D}, random_tensor(D * D, sd, s)});
    t.push_back({p + "wv", {D, D}, random_tensor(D * D, sd, s)});
    t.push_back({p + "wo", {D, D}, random_tensor(D * D, sd, s)});
    t.push_back({p + "mlp_norm", {D}, std::vector<float>(D, 1.f)});
    t.push_back({p + "w_up", {F, D}, random_tensor(F * D, sd, s)});
    t.push_back({p + "w_down", {D, F}, random_tensor(D * F, sf, s)});
  }
  t.push_back({"final_norm", {D}, std::vector<float>(D, 1.f)});
  t.push_back({"lm_head", {cfg.vocab, D}, random_tensor(cfg.vocab * D, sd, s)});
  write_safetensors(path, t, cfg.to_metadata());
}

ShardedModel::ShardedModel(const SafetensorsFile& f, int rank, int size, bool exact_reduce)
    : rank_(rank), size_(size), exact_(exact_reduce) {
  cfg_ = ModelConfig::from_metadata(f.metadata(), "model");
  const std::size_t B = cfg_.blocks, D = cfg_.dim, F = cfg_.ffn, hd = cfg_.head_dim();
  if (B % static_cast<std::size_t>(size) != 0)
    throw std::invalid_argument("model has " + std::to_string(B) + " blocks, which " +
                                std::to_string(size) +
                                " ranks cannot share evenly: use a rank count that divides " +
                                std::to_string(B) + ", or --make-model with --blocks");
  block0_ = static_cast<std::size_t>(rank) * B / static_cast<std::size_t>(size);
  block1_ = static_cast<std::size_t>(rank + 1) * B / static_cast<std::size_t>(size);
  const std::size_t hb = cfg_.heads / B, fb = F / B;  // heads and ffn units per block
  lq_ = (block1_ - block0_) * hb * hd;
  lf_ = (block1_ - block0_) * fb;
  const std::size_t q0 = block0_ * hb * hd, q1 = q0 + lq_, f0 = block0_ * fb, f1 = f0 + lf_;
  embed_ = f.all("embed");
  final_norm_ = f.all("final_norm");
  lm_head_ = f.all("lm_head");
  for (std::size_t l = 0; l < cfg_.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    Layer L;
    L.attn_norm = f.all(p + "attn_norm");
    L.wq = f.slice(p + "wq", q0, q1, 0, D);  // column-parallel: our output rows
    L.wk = f.slice(p + "wk", q0, q1, 0, D);
    L.wv = f.slice(p + "wv", q0, q1, 0, D);
    L.wo = f.slice(p + "wo", 0, D, q0, q1);  // row-parallel: our input columns
    L.mlp_norm = f.all(p + "mlp_norm");
    L.w_up = f.slice(p + "w_up", f0, f1, 0, D);
    L.w_down = f.slice(p + "w_down", 0, D, f0, f1);
    if (L.attn_norm.size() != D || L.mlp_norm.size() != D)
      throw std::invalid_argument("model: " + p + "norm weights do not have dim entries");
    layers_.push_back(std::move(L));
  }
  if (embed_.size() != cfg_.vocab * D || lm_head_.size() != cfg_.vocab * D ||
      final_norm_.size() != D)
    throw std::invalid_argument("model: embed/lm_head/final_norm shapes do not match the metadata");
}

void ShardedModel::reset_cache(std::size_t slots, std::size_t max_len) {
  slots_ = slots;
  max_len_ = max_len;
  for (auto& L : layers_) {
    L.k_cache.assign(slots * max_len * lq_, 0.f);
    L.v_cache.assign(slots * max_len * lq_, 0.f);
  }
}

std::pair<std::size_t, std::size_t> ShardedModel::kv_columns(std::size_t b0, std::size_t b1) const {
  if (b0 >= b1 || b0 < block0_ || b1 > block1_)
    throw std::invalid_argument("KV blocks [" + std::to_string(b0) + ", " + std::to_string(b1) +
                                ") are not within this rank's [" + std::to_string(block0_) + ", " +
                                std::to_string(block1_) + ")");
  const std::size_t bw = cfg_.heads / cfg_.blocks * cfg_.head_dim();  // cache columns per block
  return {(b0 - block0_) * bw, (b1 - b0) * bw};
}

std::size_t ShardedModel::kv_floats(std::size_t len, std::size_t b0, std::size_t b1) const {
  return cfg_.layers * 2 * len * kv_columns(b0, b1).second;
}

// Calls piece(layer, values?, cache offset, message offset, width) for every piece of the
// layout in model.hpp, in message order: the one rule export_kv and import_kv share.
template <class Piece>
void ShardedModel::walk_kv(std::size_t slot, std::size_t len, std::size_t b0, std::size_t b1,
                           Piece piece) const {
  if (slot >= slots_ || len > max_len_)
    throw std::invalid_argument("KV slot or length outside the cache (see reset_cache)");
  const auto [col, width] = kv_columns(b0, b1);
  std::size_t off = 0;
  for (std::size_t l = 0; l < layers_.size(); ++l)
    for (bool values : {false, true})
      for (std::size_t p = 0; p < len; ++p, off += width)
        piece(l, values, (slot * max_len_ + p) * lq_ + col, off, width);
}

void ShardedModel::export_kv(std::size_t slot, std::size_t len, std::size_t b0, std::size_t b1,
                             float* out) const {
  walk_kv(slot, len, b0, b1,
          [&](std::size_t l, bool values, std::size_t at, std::size_t off, std::size_t n) {
            const auto& c = values ? layers_[l].v_cache : layers_[l].k_cache;
            std::copy_n(c.data() + at, n, out + off);
          });
}

void ShardedModel::import_kv(std::size_t slot, std::size_t len, std::size_t b0, std::size_t b1,
                             const float* in) {
  walk_kv(slot, len, b0, b1,
          [&](std::size_t l, bool values, std::size_t at, std::size_t off, std::size_t n) {
            auto& c = values ? layers_[l].v_cache : layers_[l].k_cache;
            std::copy_n(in + off, n, c.data() + at);
          });
}

// x[r] += W_rowparallel * in[r]; in holds this rank's in_local columns. See model.hpp.
void ShardedModel::row_parallel(const std::vector<float>& in, std::size_t in_local,
                                std::size_t rows, const std::vector<float>& w,
                                std::vector<float>& x, const AllreduceFn& allreduce) {
  const std::size_t D = cfg_.dim, B = cfg_.blocks, nb = block1_ - block0_;
  const std::size_t bw = in_local / nb;  // block width
  const std::size_t slots = exact_ ? B : 1;
  red_.assign(rows * slots * D, 0.f);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t b = 0; b < nb; ++b) {
      float* out = red_.data() + (r * slots + (exact_ ? block0_ + b : 0)) * D;
      const float* a = in.data() + r * in_local + b * bw;
      for (std::size_t i = 0; i < D; ++i) {
        const float* wr = w.data() + i * in_local + b * bw;
        float s = 0.f;
        for (std::size_t k = 0; k < bw; ++k) s += wr[k] * a[k];
        out[i] += s + 0.f;  // + 0.f: a -0 partial becomes +0 as after any reduction
      }
    }
  allreduce(red_.data(), red_.size());
  for (std::size_t r = 0; r < rows; ++r) {
    float* xr = x.data() + r * D;
    for (std::size_t i = 0; i < D; ++i) {
      float s = red_[(r * slots) * D + i];
      for (std::size_t b = 1; b < slots; ++b) s += red_[(r * slots + b) * D + i];
      xr[i] += s;
    }
  }
}

void ShardedModel::forward(const std::vector<int>& tokens, const std::vector<int>& positions,
                           const std::vector<int>& slot, const std::vector<char>& want_logits,
                           std::vector<float>& logits, const AllreduceFn& allreduce) {
  const std::size_t T = tokens.size(), D = cfg_.dim, hd = cfg_.head_dim(), V = cfg_.vocab;
  const std::size_t lh = lq_ / hd;
  std::vector<float> x(T * D), h(T * D), q(T * lq_), k(T * lq_), v(T * lq_), a(T * lq_), u(T * lf_),
      scores(max_len_);
  for (std::size_t t = 0; t < T; ++t)
    std::copy_n(embed_.data() + static_cast<std::size_t>(tokens[t]) * D, D, x.data() + t * D);
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  for (auto& L : layers_) {
    // Attention half: column-parallel q, k, v (whole heads), row-parallel output.
    for (std::size_t t = 0; t < T; ++t) rmsnorm(&x[t * D], L.attn_norm.data(), &h[t * D], D);
    matmul(h.data(), T, L.wq.data(), lq_, D, q.data());
    matmul(h.data(), T, L.wk.data(), lq_, D, k.data());
    matmul(h.data(), T, L.wv.data(), lq_, D, v.data());
    for (std::size_t t = 0; t < T; ++t) {
      rope(&q[t * lq_], lh, hd, positions[t]);
      rope(&k[t * lq_], lh, hd, positions[t]);
      const std::size_t c =
          (static_cast<std::size_t>(slot[t]) * max_len_ + static_cast<std::size_t>(positions[t])) *
          lq_;
      std::copy_n(&k[t * lq_], lq_, &L.k_cache[c]);
      std::copy_n(&v[t * lq_], lq_, &L.v_cache[c]);
    }
    for (std::size_t t = 0; t < T; ++t) {
      const std::size_t base = static_cast<std::size_t>(slot[t]) * max_len_ * lq_;
      const std::size_t n = static_cast<std::size_t>(positions[t]) + 1;  // causal
      for (std::size_t hh = 0; hh < lh; ++hh) {
        const float* qh = &q[t * lq_ + hh * hd];
        float mx = -INFINITY;
        for (std::size_t p = 0; p < n; ++p) {
          const float* kh = &L.k_cache[base + p * lq_ + hh * hd];
          float s = 0.f;
          for (std::size_t i = 0; i < hd; ++i) s += qh[i] * kh[i];
          scores[p] = s * scale;
          mx = std::max(mx, scores[p]);
        }
        float sum = 0.f;
        for (std::size_t p = 0; p < n; ++p) sum += (scores[p] = std::exp(scores[p] - mx));
        float* ah = &a[t * lq_ + hh * hd];
        std::fill_n(ah, hd, 0.f);
        for (std::size_t p = 0; p < n; ++p) {
          const float* vh = &L.v_cache[base + p * lq_ + hh * hd];
          const float wgt = scores[p] / sum;
          for (std::size_t i = 0; i < hd; ++i) ah[i] += wgt * vh[i];
        }
      }
    }
    row_parallel(a, lq_, T, L.wo, x, allreduce);
    // MLP half: column-parallel up projection, row-parallel down projection.
    for (std::size_t t = 0; t < T; ++t) rmsnorm(&x[t * D], L.mlp_norm.data(), &h[t * D], D);
    matmul(h.data(), T, L.w_up.data(), lf_, D, u.data());
    for (auto& e : u) e = e / (1.f + std::exp(-e));  // SiLU
    row_parallel(u, lf_, T, L.w_down, x, allreduce);
  }
  logits.clear();
  std::vector<float> row(V);
  for (std::size_t t = 0; t < T; ++t) {
    if (!want_logits[t]) continue;
    rmsnorm(&x[t * D], final_norm_.data(), &h[t * D], D);
    matmul(&h[t * D], 1, lm_head_.data(), V, D, row.data());
    logits.insert(logits.end(), row.begin(), row.end());
  }
}

}  // namespace spark::example
