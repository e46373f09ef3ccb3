# Cross-compiles ovt for aarch64 Linux with Debian's cross GCC (gcc-aarch64-linux-gnu)
# and the multiarch -dev packages; ctest runs the tests under qemu user-mode
# emulation. scripts/cross.sh installs all of it and builds (docs/architectures.md).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(OVT_CROSS_TRIPLE aarch64-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
