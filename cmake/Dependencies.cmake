# Finds ovt's dependencies and names the Debian package to install when one
# is missing. Everything is collected into the interface target ovt_deps.
find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: apt-get install pkg-config")
endif()

add_library(ovt_deps INTERFACE)

function(ovt_require_pkg name module debian)
  pkg_check_modules(${name} IMPORTED_TARGET ${module})
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR "${module} not found: apt-get install ${debian} (or run scripts/setup.sh)")
  endif()
  target_link_libraries(ovt_deps INTERFACE PkgConfig::${name})
endfunction()

ovt_require_pkg(SECP256K1 libsecp256k1 libsecp256k1-dev)
ovt_require_pkg(CURL libcurl libcurl4-openssl-dev)
ovt_require_pkg(JANSSON jansson libjansson-dev)
ovt_require_pkg(ZSTD libzstd libzstd-dev)
ovt_require_pkg(ZLIB zlib zlib1g-dev)
ovt_require_pkg(OPENBLAS openblas libopenblas-dev)

include(CheckIncludeFile)
set(CMAKE_REQUIRED_INCLUDES ${SECP256K1_INCLUDE_DIRS})
check_include_file(secp256k1_recovery.h OVT_HAVE_SECP_RECOVERY)
if(NOT OVT_HAVE_SECP_RECOVERY)
  message(FATAL_ERROR "libsecp256k1 lacks the recovery module (secp256k1_recovery.h): apt-get install libsecp256k1-dev")
endif()

find_package(OpenSSL 3.0)
if(NOT OPENSSL_FOUND)
  message(FATAL_ERROR "OpenSSL 3 not found: apt-get install libssl-dev")
endif()
find_package(Threads REQUIRED)
target_link_libraries(ovt_deps INTERFACE OpenSSL::Crypto Threads::Threads m)

# CUDA is optional: the backend is built when a toolkit with cuBLAS is found,
# never for a cross build (check_language would find the host's nvcc).
set(OVT_HAVE_CUDA OFF)
if(OVT_CUDA AND NOT CMAKE_CROSSCOMPILING)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND AND TARGET CUDA::cublas)
      set(OVT_HAVE_CUDA ON)
    endif()
  endif()
endif()
message(STATUS "ovt: CUDA backend ${OVT_HAVE_CUDA}")

# MPI is optional: the data-parallel transport (dp/mpi.c,
# docs/data-parallel.md) is built when MPI's C bindings are found; otherwise
# dp/single.c stands in and `mpirun ovt train` says how to get it.
# Imported targets' include folders are SYSTEM, so -Werror holds with mpi.h.
set(OVT_HAVE_MPI OFF)
if(OVT_MPI AND NOT CMAKE_CROSSCOMPILING) # the host's MPI is no use to a target
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(OVT_HAVE_MPI ON)
    target_link_libraries(ovt_deps INTERFACE MPI::MPI_C)
    # tests run ranks through it (tests/support/mpirun.c)
    set(OVT_MPIRUN ${MPIEXEC_EXECUTABLE})
  endif()
endif()
message(STATUS "ovt: MPI transport ${OVT_HAVE_MPI}")

# node tools (anvil, cast, solc-js) come from the npm packages pinned in
# package.json, installed by `npm ci` into node_modules/.
set(OVT_NODE_BIN ${CMAKE_SOURCE_DIR}/node_modules/.bin)
find_program(OVT_ANVIL anvil PATHS ${OVT_NODE_BIN} NO_DEFAULT_PATH)
find_program(OVT_CAST cast PATHS ${OVT_NODE_BIN} NO_DEFAULT_PATH)
find_program(OVT_SOLCJS solcjs PATHS ${OVT_NODE_BIN} NO_DEFAULT_PATH)
if(NOT OVT_ANVIL OR NOT OVT_CAST OR NOT OVT_SOLCJS)
  message(WARNING "anvil/cast/solcjs not found in node_modules/.bin: run `npm ci`; chain tests will be skipped")
endif()
