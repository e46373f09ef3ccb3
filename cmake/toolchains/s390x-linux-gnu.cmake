# Cross-compiles ovt for s390x Linux with Debian's cross GCC (gcc-s390x-linux-gnu)
# and the multiarch -dev packages; ctest runs the tests under qemu user-mode
# emulation. scripts/cross.sh installs all of it and builds (docs/architectures.md).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR s390x)
set(OVT_CROSS_TRIPLE s390x-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
