# Cross-build for aarch64 (the DGX Spark's CPU) from x86 with Debian's crossbuild-essential-arm64,
# against the sysroot scripts/arm64-sysroot makes; tests run under qemu-user (qemu-aarch64-static).
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
#         -DSPARK_ARM64_SYSROOT=$PWD/build-arm64/sysroot
# (scripts/variant build arm64 does both steps.) On a Spark itself, build natively instead.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

if(NOT SPARK_ARM64_SYSROOT AND DEFINED ENV{SPARK_ARM64_SYSROOT})
  set(SPARK_ARM64_SYSROOT $ENV{SPARK_ARM64_SYSROOT})
endif()
if(NOT SPARK_ARM64_SYSROOT OR NOT EXISTS ${SPARK_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu)
  message(FATAL_ERROR "sparkrun: aarch64 cross-build: no sysroot at '${SPARK_ARM64_SYSROOT}': "
    "make one with scripts/arm64-sysroot DIR and pass -DSPARK_ARM64_SYSROOT=DIR")
endif()
# try_compile projects see the same sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES SPARK_ARM64_SYSROOT)

# The cross compiler's own libc and libstdc++ (/usr/aarch64-linux-gnu) come first; the
# sysroot holds the libraries (PMIx, hwloc, rdma-core, fmt, OpenSSL, GoogleTest, Boost).
set(CMAKE_SYSROOT ${SPARK_ARM64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH ${SPARK_ARM64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_SYSROOT_DIR} ${SPARK_ARM64_SYSROOT})
set(ENV{PKG_CONFIG_LIBDIR}
    "${SPARK_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${SPARK_ARM64_SYSROOT}/usr/share/pkgconfig")
# Libraries' own dependencies (libpmix -> libevent, libhwloc, ...) resolve in the sysroot.
set(_spark_rpath_link
    "-Wl,-rpath-link,${SPARK_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu:${SPARK_ARM64_SYSROOT}/lib/aarch64-linux-gnu")
set(CMAKE_EXE_LINKER_FLAGS_INIT ${_spark_rpath_link})
set(CMAKE_SHARED_LINKER_FLAGS_INIT ${_spark_rpath_link})

# Test programs (and gtest's discovery) run under qemu-user with the sysroot as their root.
find_program(SPARK_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(SPARK_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${SPARK_QEMU_AARCH64} -L ${SPARK_ARM64_SYSROOT})
endif()
