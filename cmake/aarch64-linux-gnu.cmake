# Cross-compiling ggtrain for 64-bit ARM Linux on an x86-64 Debian machine:
# Debian's cross compiler (g++-aarch64-linux-gnu), the arm64 packages of the
# libraries extracted into a folder (scripts/aarch64_sysroot.sh), and the
# programs run under qemu-user. scripts/test_aarch64.sh drives all three.
#
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DGGTRAIN_AARCH64_SYSROOT=$PWD/build-aarch64/sysroot
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# The toolchain file is read again for every try_compile, where only the
# variables named here are set.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES GGTRAIN_AARCH64_SYSROOT)
if(NOT GGTRAIN_AARCH64_SYSROOT)
  set(GGTRAIN_AARCH64_SYSROOT "${CMAKE_CURRENT_LIST_DIR}/../build-aarch64/sysroot")
endif()
get_filename_component(GGTRAIN_AARCH64_SYSROOT "${GGTRAIN_AARCH64_SYSROOT}" ABSOLUTE)
set(GGTRAIN_AARCH64_SYSROOT "${GGTRAIN_AARCH64_SYSROOT}" CACHE PATH "arm64 packages extracted (scripts/aarch64_sysroot.sh)")
if(NOT EXISTS "${GGTRAIN_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu")
  message(FATAL_ERROR "GGTRAIN_AARCH64_SYSROOT: '${GGTRAIN_AARCH64_SYSROOT}' holds no arm64 libraries; "
                      "make it with: bash scripts/aarch64_sysroot.sh ${GGTRAIN_AARCH64_SYSROOT}")
endif()

# Libraries, headers and CMake packages from the sysroot only, programs from
# the host. The C library and libstdc++'s headers are the cross compiler's
# own (/usr/aarch64-linux-gnu): the sysroot holds no libc headers, so its
# include folder can come first without hiding them.
set(CMAKE_FIND_ROOT_PATH "${GGTRAIN_AARCH64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR}
    "${GGTRAIN_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${GGTRAIN_AARCH64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${GGTRAIN_AARCH64_SYSROOT}")

# The libraries' own dependencies (libdnnl.so needs libgomp, ...) are
# resolved in the sysroot at link time too.
set(ggtrain_arm64_libs "${GGTRAIN_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu:${GGTRAIN_AARCH64_SYSROOT}/lib/aarch64-linux-gnu")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${ggtrain_arm64_libs}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,${ggtrain_arm64_libs}")

# CTest runs the test programs (and gtest_discover_tests lists their tests)
# through qemu-user, with the sysroot as the programs' root for the loader
# and the shared libraries. The emulated CPU is a named core, not qemu's
# `max` (every optional feature, SVE included): by default the Neoverse N1
# of AWS Graviton2 and Ampere Altra (Armv8.2: NEON, fp16, dot product; no SVE).
find_program(GGTRAIN_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(GGTRAIN_QEMU_CPU neoverse-n1 CACHE STRING "The CPU qemu-aarch64 emulates for the tests (qemu-aarch64 -cpu help)")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES GGTRAIN_QEMU_CPU)
set(CMAKE_CROSSCOMPILING_EMULATOR "${GGTRAIN_QEMU_AARCH64};-cpu;${GGTRAIN_QEMU_CPU};-L;${GGTRAIN_AARCH64_SYSROOT}")
# The loader finds every library in the sysroot through qemu's -L; a build
# tree's rpath would only name the cross compiler's folders.
set(CMAKE_SKIP_RPATH ON)
