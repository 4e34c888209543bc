# Third-party dependencies, all from Debian packages (plus CUDA under /usr/local/cuda).
# Optional parts are AUTO by default: built when found, reported in one line when not.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED)            # Asio (header-only)
find_package(CLI11 CONFIG REQUIRED)           # command lines
find_package(fmt REQUIRED)
find_package(OpenSSL REQUIRED)                # HMAC for the control plane
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)

set(SPARK_ENABLE_PMIX AUTO CACHE STRING "Build the PMIx server (launcher) and client (libspark): AUTO|ON|OFF")
set(SPARK_ENABLE_VERBS AUTO CACHE STRING "Build the RoCE (ibverbs) transport: AUTO|ON|OFF")
set(SPARK_ENABLE_CUDA AUTO CACHE STRING "Build CUDA kernels and device-buffer collectives: AUTO|ON|OFF")
foreach(opt SPARK_ENABLE_PMIX SPARK_ENABLE_VERBS SPARK_ENABLE_CUDA)
  set_property(CACHE ${opt} PROPERTY STRINGS AUTO ON OFF)
endforeach()

# spark_optional(NAME FOUND WHAT HOWTO): turns AUTO into ON/OFF, fails when ON but missing.
function(spark_optional var found what howto)
  if(${var} STREQUAL "OFF")
    message(STATUS "sparkrun: ${what}: disabled (${var}=OFF)")
    set(${var}_ON FALSE PARENT_SCOPE)
  elseif(${found})
    message(STATUS "sparkrun: ${what}: enabled")
    set(${var}_ON TRUE PARENT_SCOPE)
  elseif(${var} STREQUAL "ON")
    message(FATAL_ERROR "sparkrun: ${what} requested (${var}=ON) but not found: ${howto}")
  else()
    message(STATUS "sparkrun: ${what}: not built, not found (${howto})")
    set(${var}_ON FALSE PARENT_SCOPE)
  endif()
endfunction()

if(NOT SPARK_ENABLE_PMIX STREQUAL "OFF")
  pkg_check_modules(PMIX IMPORTED_TARGET pmix)
endif()
spark_optional(SPARK_ENABLE_PMIX PMIX_FOUND "PMIx" "apt-get install libpmix-dev")

if(NOT SPARK_ENABLE_VERBS STREQUAL "OFF")
  pkg_check_modules(IBVERBS IMPORTED_TARGET libibverbs)
endif()
spark_optional(SPARK_ENABLE_VERBS IBVERBS_FOUND "RoCE transport (ibverbs)" "apt-get install libibverbs-dev")

set(SPARK_CUDA_FOUND FALSE)
# Cross-building for aarch64 (the Spark's sbsa CUDA): this needs NVIDIA's cross toolkit
# (cuda-cross-sbsa, targets/sbsa-linux) and a CMAKE_CUDA_COMPILER given explicitly; the
# host's x86 nvcc alone cannot link for aarch64. Say so instead of trying.
set(_spark_cuda_cross_blocked FALSE)
if(CMAKE_CROSSCOMPILING AND NOT CMAKE_CUDA_COMPILER AND NOT SPARK_ENABLE_CUDA STREQUAL "OFF")
  set(_spark_cuda_cross_blocked TRUE)
  message(STATUS "sparkrun: CUDA kernels for ${CMAKE_SYSTEM_PROCESSOR}: not built in this "
    "cross-build: it needs NVIDIA's cross toolkit for sbsa (cuda-cross-sbsa) and "
    "-DCMAKE_CUDA_COMPILER; build natively on the Spark for CUDA (docs/aarch64.md)")
  if(SPARK_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "sparkrun: SPARK_ENABLE_CUDA=ON in a cross-build without "
      "CMAKE_CUDA_COMPILER: give the sbsa cross toolkit's nvcc, or build on the Spark")
  endif()
endif()
if(NOT SPARK_ENABLE_CUDA STREQUAL "OFF" AND NOT _spark_cuda_cross_blocked)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # GB10 (DGX Spark) and H200, plus PTX of the newest for parts not yet released.
      set(CMAKE_CUDA_ARCHITECTURES "90-real;121-real;121-virtual")
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(SPARK_CUDA_FOUND TRUE)
    endif()
  endif()
endif()
if(_spark_cuda_cross_blocked)
  set(SPARK_ENABLE_CUDA_ON FALSE)
else()
  spark_optional(SPARK_ENABLE_CUDA SPARK_CUDA_FOUND "CUDA kernels" "install the CUDA toolkit under /usr/local/cuda")
endif()

if(SPARK_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
