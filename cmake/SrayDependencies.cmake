# Every third-party dependency is found here, once, through its own CMake
# package or pkg-config. scripts/install-deps installs the Debian packages.

find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(tomlplusplus 3 REQUIRED)
find_package(CLI11 2 REQUIRED)
# envs: environment.yml and conda-lock.yml, conda-meta JSON, SHA-256.
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
pkg_check_modules(PMIX REQUIRED IMPORTED_TARGET pmix)
pkg_check_modules(UCX REQUIRED IMPORTED_TARGET ucx)
# The dashboard's HTTP server (libcpp-httplib-dev).
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
find_package(msgpack QUIET NAMES msgpack-cxx msgpack)
if(NOT msgpack_FOUND AND NOT msgpack-cxx_FOUND)
  find_path(SRAY_MSGPACK_INCLUDE_DIR msgpack.hpp REQUIRED)
endif()

# spank.h comes with libslurm-dev; the plugin resolves Slurm's symbols from the
# host process (srun, sbatch, slurmstepd) and so does not link libslurm.
find_path(SLURM_INCLUDE_DIR slurm/spank.h REQUIRED)

# LibTorch is optional: the training module is built only when it is present.
find_package(Torch QUIET PATHS /usr/share/cmake/Torch /usr/lib/x86_64-linux-gnu/cmake/Torch)
option(SRAY_WITH_TORCH "Build LibTorch data-parallel training" ${Torch_FOUND})
if(SRAY_WITH_TORCH AND NOT Torch_FOUND)
  message(FATAL_ERROR "sray: SRAY_WITH_TORCH=ON but LibTorch was not found: "
                      "run scripts/install-deps (libtorch-dev libgloo-dev) or pass -DSRAY_WITH_TORCH=OFF")
endif()
if(SRAY_WITH_TORCH)
  # Debian's LibTorch links gloo into libtorch_cpu; a pip wheel's LibTorch too.
  find_library(SRAY_GLOO_LIBRARY gloo)
  if(NOT SRAY_GLOO_LIBRARY)
    set(SRAY_GLOO_LIBRARY "")
  endif()
  set(SRAY_TORCH_DEFINITIONS USE_C10D_GLOO)
  # The training examples read gzip-compressed IDX files (Fashion-MNIST).
  find_package(ZLIB REQUIRED)
  # A CUDA LibTorch has torch_cuda; with SRAY_WITH_CUDA the training module
  # builds its NCCL path (ProcessGroupNCCL).
  if(SRAY_WITH_CUDA)
    if(NOT TORCH_CUDA_LIBRARIES AND NOT TARGET torch_cuda)
      message(FATAL_ERROR "sray: SRAY_WITH_CUDA=ON but the LibTorch found (${Torch_DIR}) has no CUDA: "
                          "point CMAKE_PREFIX_PATH at a CUDA LibTorch, or configure with -DSRAY_WITH_CUDA=OFF")
    endif()
    list(APPEND SRAY_TORCH_DEFINITIONS USE_C10D_NCCL SRAY_TRAIN_WITH_NCCL)
  endif()
elseif(SRAY_WITH_CUDA)
  message(FATAL_ERROR "sray: SRAY_WITH_CUDA=ON needs LibTorch: configure with -DSRAY_WITH_TORCH=ON")
endif()

# jemalloc for every program that links the runtime: glibc's malloc took a
# third of the driver's time in the task benchmark, and jemalloc raised actor
# call rates about 1.8x and task rates about 1.2x here (docs/benchmarks.md).
# Off under sanitizers, which bring their own allocator.
option(SRAY_WITH_JEMALLOC "Link programs that use the sray runtime against jemalloc" ON)
if(SRAY_WITH_JEMALLOC AND SRAY_SANITIZER)
  set(SRAY_WITH_JEMALLOC OFF)
endif()
if(SRAY_WITH_JEMALLOC)
  find_library(SRAY_JEMALLOC_LIBRARY NAMES jemalloc)
  if(NOT SRAY_JEMALLOC_LIBRARY)
    message(STATUS "sray: jemalloc not found (Debian: libjemalloc-dev): programs use glibc's "
                   "malloc, which is slower")
    set(SRAY_WITH_JEMALLOC OFF)
  endif()
endif()

if(SRAY_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
message(STATUS "sray: LibTorch training ${SRAY_WITH_TORCH}, PMIx ${PMIX_VERSION}, UCX ${UCX_VERSION}, "
               "jemalloc ${SRAY_WITH_JEMALLOC}")
