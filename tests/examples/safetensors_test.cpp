// The inference examples' library: the safetensors reader (round trip, slices, every refusal
// names the problem) and the sharded model (shards, bit-identity, the KV hand-off).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "model.hpp"
#include "safetensors.hpp"

using namespace spark::example;

namespace {

struct TempFile {
  std::string path = "/tmp/spark_st_test_" + std::to_string(::getpid()) + "_" +
                     std::to_string(counter++) + ".safetensors";
  ~TempFile() { std::remove(path.c_str()); }
  static inline int counter = 0;
};

// Writes raw bytes: 8-byte little-endian header length, header, data.
void write_raw(const std::string& path, const std::string& header, std::size_t data_bytes,
               long long declared = -1) {
  std::ofstream f(path, std::ios::binary);
  unsigned long long n = declared < 0 ? header.size() : static_cast<unsigned long long>(declared);
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));
  f << header << std::string(data_bytes, '\0');
}

std::string error_of(const std::string& path) {
  try {
    SafetensorsFile f(path);
  } catch (const SafetensorsError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Safetensors, RoundTripAndSlices) {
  TempFile t;
  write_safetensors(t.path, {{"a", {2, 3}, {0, 1, 2, 3, 4, 5}}, {"b", {4}, {9, 8, 7, 6}}},
                    {{"k", "v"}});
  SafetensorsFile f(t.path);
  EXPECT_EQ(f.metadata().at("k"), "v");
  EXPECT_EQ(f.info("a").shape, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(f.all("b"), (std::vector<float>{9, 8, 7, 6}));
  EXPECT_EQ(f.slice("a", 0, 2, 1, 3), (std::vector<float>{1, 2, 4, 5}));
  EXPECT_EQ(f.slice("a", 1, 2, 0, 3), (std::vector<float>{3, 4, 5}));
  EXPECT_THROW(f.slice("a", 0, 3, 0, 1), SafetensorsError);
  try {
    f.info("missing");
    FAIL() << "no exception";
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor 'missing'"), std::string::npos);
  }
}

TEST(Safetensors, Refusals) {
  TempFile t;
  write_raw(t.path, "{}", 0, 1000);
  EXPECT_NE(error_of(t.path).find("exceeds the file size"), std::string::npos) << error_of(t.path);
  write_raw(t.path, "{not json", 0);
  EXPECT_NE(error_of(t.path).find("not valid JSON"), std::string::npos);
  write_raw(t.path, R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4);
  EXPECT_NE(error_of(t.path).find("only F32"), std::string::npos);
  write_raw(t.path, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", 8);
  EXPECT_NE(error_of(t.path).find("outside the data section"), std::string::npos);
  write_raw(t.path, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8);
  EXPECT_NE(error_of(t.path).find("needs 12"), std::string::npos);
  write_raw(
      t.path,
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12);
  EXPECT_NE(error_of(t.path).find("overlap"), std::string::npos);
  write_raw(t.path, R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", 8);
  EXPECT_NE(error_of(t.path).find("invalid"), std::string::npos);
  write_raw(t.path, R"({"a":{"dtype":"F32"}})", 0);
  EXPECT_NE(error_of(t.path).find("needs dtype, shape and data_offsets"), std::string::npos);
  std::ofstream(t.path) << "abc";
  EXPECT_NE(error_of(t.path).find("too short"), std::string::npos);
  EXPECT_NE(error_of("/nonexistent/x.safetensors").find("cannot open"), std::string::npos);
}

TEST(ShardedModel, ShardsCoverTheWholeModel) {
  TempFile t;
  ModelConfig c;
  c.vocab = 16, c.dim = 12, c.heads = 6, c.ffn = 12, c.layers = 1, c.blocks = 6;
  make_model(c, t.path);
  SafetensorsFile f(t.path);
  EXPECT_EQ(ModelConfig::from_metadata(f.metadata(), t.path).dim, 12u);
  EXPECT_NO_THROW(ShardedModel(f, 2, 3, true));
  try {
    ShardedModel(f, 0, 4, true);
    FAIL() << "4 ranks accepted for 6 blocks";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cannot share evenly"), std::string::npos);
  }
  c.heads = 5;
  EXPECT_THROW(c.validate(), std::invalid_argument);
}

// One forward step on 1 rank and, simulated, on 2 ranks (the allreduce adds both ranks'
// buffers): identical bits.
TEST(ShardedModel, TwoShardsGiveTheSameBits) {
  TempFile t;
  ModelConfig c;
  c.vocab = 32, c.dim = 24, c.heads = 6, c.ffn = 36, c.layers = 2, c.blocks = 6;
  make_model(c, t.path);
  SafetensorsFile f(t.path);
  std::vector<int> tok{1, 5, 7, 3}, pos{0, 1, 2, 0}, slot{0, 0, 0, 1};
  std::vector<char> want{0, 0, 1, 1};
  ShardedModel one(f, 0, 1, true);
  one.reset_cache(2, 4);
  std::vector<float> l1;
  one.forward(tok, pos, slot, want, l1, [](float*, std::size_t) {});
  // Two shards in two threads; the allreduce adds rank 0's and rank 1's buffers.
  ShardedModel s0(f, 0, 2, true), s1(f, 1, 2, true);
  s0.reset_cache(2, 4);
  s1.reset_cache(2, 4);
  std::barrier sync(2);
  float* ptr[2] = {nullptr, nullptr};
  std::vector<float> sum, l0, l1b;
  auto allreduce = [&](int r) {
    return [&, r](float* d, std::size_t n) {
      ptr[r] = d;
      sync.arrive_and_wait();
      if (r == 0) {
        sum.resize(n);
        for (std::size_t k = 0; k < n; ++k) sum[k] = ptr[0][k] + ptr[1][k];
      }
      sync.arrive_and_wait();
      std::copy_n(sum.data(), n, d);
      sync.arrive_and_wait();
    };
  };
  std::thread other([&] { s1.forward(tok, pos, slot, want, l1b, allreduce(1)); });
  s0.forward(tok, pos, slot, want, l0, allreduce(0));
  other.join();
  EXPECT_EQ(l0, l1b);
  ASSERT_EQ(l0.size(), l1.size());
  EXPECT_EQ(0, std::memcmp(l0.data(), l1.data(), l1.size() * sizeof(float)));
}

// The KV hand-off of disagg_serving: a prompt's cache exported by one model and imported into
// another (another slot, a longer cache) continues with the same bits; the message layout is
// layers x (k, v) x positions x the blocks' heads; blocks a rank does not own are refused.
TEST(ShardedModel, KvHandOffKeepsTheBits) {
  TempFile t;
  ModelConfig c;
  c.vocab = 32, c.dim = 24, c.heads = 6, c.ffn = 36, c.layers = 2, c.blocks = 6;
  make_model(c, t.path);
  SafetensorsFile f(t.path);
  auto none = [](float*, std::size_t) {};
  ShardedModel a(f, 0, 1, true), b(f, 0, 1, true);
  a.reset_cache(1, 4);
  b.reset_cache(3, 9);
  std::vector<float> la, lb;
  a.forward({4, 9, 2}, {0, 1, 2}, {0, 0, 0}, {0, 0, 1}, la, none);
  ASSERT_EQ(a.kv_floats(3, 0, 6), 2u * 2 * 3 * 24);
  std::vector<float> kv(a.kv_floats(3, 0, 6));
  a.export_kv(0, 3, 0, 6, kv.data());
  b.import_kv(2, 3, 0, 6, kv.data());
  a.forward({7}, {3}, {0}, {1}, la, none);
  b.forward({7}, {3}, {2}, {1}, lb, none);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
  // Two halves of the heads, handed over separately, are the same cache.
  ShardedModel h(f, 0, 1, true);
  h.reset_cache(1, 9);
  std::vector<float> k0(a.kv_floats(3, 0, 2)), k1(a.kv_floats(3, 2, 6));
  a.export_kv(0, 3, 0, 2, k0.data());
  a.export_kv(0, 3, 2, 6, k1.data());
  h.import_kv(0, 3, 0, 2, k0.data());
  h.import_kv(0, 3, 2, 6, k1.data());
  std::vector<float> lh;
  h.forward({7}, {3}, {0}, {1}, lh, none);
  EXPECT_EQ(0, std::memcmp(la.data(), lh.data(), la.size() * sizeof(float)));
  ShardedModel r1(f, 1, 3, true);  // owns blocks [2, 4)
  r1.reset_cache(1, 4);
  std::vector<float> out(r1.kv_floats(3, 2, 4));
  EXPECT_NO_THROW(r1.export_kv(0, 3, 2, 4, out.data()));
  try {
    r1.export_kv(0, 3, 0, 4, out.data());
    FAIL() << "blocks outside the rank's were exported";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("not within this rank's [2, 4)"), std::string::npos);
  }
  EXPECT_THROW(r1.export_kv(1, 3, 2, 4, out.data()), std::invalid_argument);  // no slot 1
}
