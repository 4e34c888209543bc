/* What a payload checksum would cost (docs/reliability.md, "Corruption and checksums"): GB/s of
 * one core computing CRC32C (the SSE4.2 or ARMv8 instruction, one stream and three interleaved streams,
 * the fastest plain-CPU way) and zlib's CRC32, against memcpy over the same buffer. A checksum
 * on both ends reads every byte twice more; the table puts that beside a link's own speed.
 * Output: CSV "what,bytes,GBps". Built and run by bench/checksum_cost.sh.
 *   checksum_cost [BYTES] [ROUNDS]    (default 4 MiB, 200) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#if defined(__x86_64__)
#include <nmmintrin.h>
#define CRC32C_U64(c, w) _mm_crc32_u64((c), (w))
#define CRC_INSN "SSE4.2"
#elif defined(__aarch64__)
#include <arm_acle.h>
#define CRC32C_U64(c, w) ((uint64_t)__crc32cd((uint32_t)(c), (w)))
#define CRC_INSN "ARMv8 CRC"
#else
#error "a CRC32C instruction is needed (x86-64 SSE4.2 or AArch64 CRC)"
#endif

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint32_t crc32c_1(const uint8_t* p, size_t n) {
  uint64_t c = 0xffffffffu;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    c = CRC32C_U64(c, w);
  }
  return (uint32_t)c ^ 0xffffffffu;
}

/* Three independent streams over thirds of the buffer hide the instruction's latency; a real
 * implementation combines them with a carry-less multiply, which costs a few ns per buffer and
 * is left out here (it does not change GB/s). */
static uint32_t crc32c_3(const uint8_t* p, size_t n) {
  size_t third = n / 24 * 8;
  uint64_t a = 0xffffffffu, b = 0, c = 0;
  for (size_t i = 0; i < third; i += 8) {
    uint64_t x, y, z;
    memcpy(&x, p + i, 8);
    memcpy(&y, p + third + i, 8);
    memcpy(&z, p + 2 * third + i, 8);
    a = CRC32C_U64(a, x);
    b = CRC32C_U64(b, y);
    c = CRC32C_U64(c, z);
  }
  return (uint32_t)(a ^ b ^ c);
}

int main(int argc, char** argv) {
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 4u << 20;
  int rounds = argc > 2 ? atoi(argv[2]) : 200;
  uint8_t* src = malloc(n);
  uint8_t* dst = malloc(n);
  for (size_t i = 0; i < n; ++i) src[i] = (uint8_t)(i * 131 + 7);
  memset(dst, 0, n);
  volatile uint32_t sink = 0;
  const char* names[] = {"memcpy", "crc32c " CRC_INSN " 1 stream", "crc32c " CRC_INSN " 3 streams",
                         "crc32 zlib"};
  printf("what,bytes,GBps\n");
  for (int k = 0; k < 4; ++k) {
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      double t0 = now_s();
      for (int r = 0; r < rounds; ++r) {
        src[r % n] ^= 1; /* a new buffer each round, as a new message would be */
        switch (k) {
          case 0: memcpy(dst, src, n); sink += dst[r % n]; break;
          case 1: sink += crc32c_1(src, n); break;
          case 2: sink += crc32c_3(src, n); break;
          default: sink += (uint32_t)crc32(0, src, (uInt)n); break;
        }
      }
      double t = now_s() - t0;
      if (t < best) best = t;
    }
    printf("%s,%zu,%.2f\n", names[k], n, (double)n * rounds / best / 1e9);
  }
  free(src);
  free(dst);
  return sink == 42 ? 1 : 0;
}
