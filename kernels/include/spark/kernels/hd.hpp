// Portability layer for code that is compiled both by nvcc (for the GPU) and by plain g++
// (for host unit tests and the host proxy). Everything here is tiny and inline.
//
// Memory ordering: flags live in pinned, mapped host memory that the GPU, the CPU and (on a
// Spark) the NIC all touch, so loads and stores of flags use system-scope acquire/release:
// PTX ld.acquire.sys / st.release.sys on the device, GCC __atomic builtins on the host.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SPARK_HD __host__ __device__
#define SPARK_DEVICE __device__
#else
#define SPARK_HD
#define SPARK_DEVICE
#endif

namespace spark::kernels {

SPARK_HD inline std::uint64_t load_acquire(const std::uint64_t* p) {
#if defined(__CUDA_ARCH__)
  std::uint64_t v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

SPARK_HD inline std::uint32_t load_acquire(const std::uint32_t* p) {
#if defined(__CUDA_ARCH__)
  std::uint32_t v;
  asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

SPARK_HD inline void store_release(std::uint64_t* p, std::uint64_t v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

SPARK_HD inline void store_release(std::uint32_t* p, std::uint32_t v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/// Compare-and-swap with system scope; returns true when *p was `expected` and is now
/// `desired`. On a PCIe-attached GPU without host-native atomics this is atomic among GPU
/// threads only; the CPU side only ever claims after reading the flag (see control_block.hpp).
SPARK_HD inline bool compare_exchange(std::uint32_t* p, std::uint32_t expected,
                                      std::uint32_t desired) {
#if defined(__CUDA_ARCH__)
  return atomicCAS_system(reinterpret_cast<unsigned int*>(p), expected, desired) == expected;
#else
  return __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
#endif
}

/// Bounded, always NUL-terminated string copy usable in device code (no libc there).
SPARK_HD inline void copy_cstr(char* dst, std::uint32_t cap, const char* src) {
  std::uint32_t i = 0;
  if (src != nullptr) {
    for (; i + 1 < cap && src[i] != '\0'; ++i) dst[i] = src[i];
  }
  for (; i < cap; ++i) dst[i] = '\0';
}

}  // namespace spark::kernels
