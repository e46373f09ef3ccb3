# What the Debian cross toolchain files share; OVT_CROSS_TRIPLE names the
# target. The libraries come from the multiarch folders (/usr/lib/TRIPLE),
# and from a sysroot of unpacked .deb files where apt could not install a
# package (OVT_CROSS_SYSROOT, set by scripts/cross.sh).
set(CMAKE_C_COMPILER ${OVT_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${OVT_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${OVT_CROSS_TRIPLE})

set(ovt_roots /usr)
if(DEFINED ENV{OVT_CROSS_SYSROOT} AND NOT "$ENV{OVT_CROSS_SYSROOT}" STREQUAL "")
  set(OVT_CROSS_SYSROOT $ENV{OVT_CROSS_SYSROOT} CACHE PATH "unpacked .deb files for the target")
endif()
if(OVT_CROSS_SYSROOT)
  list(PREPEND ovt_roots ${OVT_CROSS_SYSROOT}/usr)
  list(APPEND CMAKE_FIND_ROOT_PATH ${OVT_CROSS_SYSROOT})
  set(ENV{PKG_CONFIG_SYSROOT_DIR} ${OVT_CROSS_SYSROOT})
  # the linker follows the libraries' own dependencies into the sysroot
  set(CMAKE_EXE_LINKER_FLAGS_INIT
      "-Wl,-rpath-link,${OVT_CROSS_SYSROOT}/usr/lib/${OVT_CROSS_TRIPLE}:${OVT_CROSS_SYSROOT}/lib/${OVT_CROSS_TRIPLE}")
  set(CMAKE_SHARED_LINKER_FLAGS_INIT ${CMAKE_EXE_LINKER_FLAGS_INIT})
endif()
# pkg-config reads the target's .pc files only, never the host's.
set(ovt_pc "")
foreach(r ${ovt_roots})
  list(APPEND ovt_pc ${r}/lib/${OVT_CROSS_TRIPLE}/pkgconfig ${r}/share/pkgconfig)
endforeach()
string(REPLACE ";" ":" ovt_pc "${ovt_pc}")
set(ENV{PKG_CONFIG_LIBDIR} "${ovt_pc}")
set(ENV{PKG_CONFIG_PATH} "")

# Programs (node, solcjs, python3) are the host's; libraries and headers the target's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# The multiarch loader (/lib/ld-*.so from libc6:ARCH) finds the libraries
# itself; qemu's -L /usr/TRIPLE would send it to the cross toolchain's
# loader, which hangs under qemu-aarch64. A sysroot holds its own libc6.
find_program(OVT_CROSS_QEMU qemu-${CMAKE_SYSTEM_PROCESSOR}-static qemu-${CMAKE_SYSTEM_PROCESSOR})
if(OVT_CROSS_QEMU AND OVT_CROSS_SYSROOT)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${OVT_CROSS_QEMU};-L;${OVT_CROSS_SYSROOT})
elseif(OVT_CROSS_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${OVT_CROSS_QEMU})
endif()
