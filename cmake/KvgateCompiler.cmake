# Compiler flags applied to kvgate's own targets (kvgate_project_options), never to dependencies.

find_program(KVGATE_CCACHE ccache)
if(KVGATE_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_C_COMPILER_LAUNCHER "${KVGATE_CCACHE}")
  set(CMAKE_CXX_COMPILER_LAUNCHER "${KVGATE_CCACHE}")
endif()

# lld links our large test binaries several times faster than bfd on two cores.
find_program(KVGATE_LLD ld.lld)
if(KVGATE_LLD)
  add_link_options(-fuse-ld=lld)
endif()

add_library(kvgate_project_options INTERFACE)
target_compile_options(kvgate_project_options INTERFACE -Wall -Wextra -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # -Wmismatched-new-delete: g++ 12 false positive on Asio's coroutine frames (recycling allocator).
  target_compile_options(kvgate_project_options INTERFACE -Wshadow=local -Wno-mismatched-new-delete)
  if(KVGATE_UNITY_BUILD)
    # A unity batch #includes the sources, and g++ then takes a source's file-local types for a
    # header's and warns that a class holding one has internal linkage (which is what is meant).
    target_compile_options(kvgate_project_options INTERFACE -Wno-subobject-linkage)
  endif()
else()
  target_compile_options(kvgate_project_options INTERFACE -Wno-shadow)
endif()
if(KVGATE_WERROR)
  target_compile_options(kvgate_project_options INTERFACE -Werror)
endif()
if(KVGATE_THREAD_SAFETY AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  target_compile_options(kvgate_project_options INTERFACE -Wthread-safety)
endif()

# Boost 1.74 Asio's awaitable.hpp needs <utility> first under C++20; clang 14 also needs to be told that
# coroutines exist (Asio 1.74 only detects them on gcc and MSVC).
add_compile_options("SHELL:-include utility")
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  add_compile_definitions(BOOST_ASIO_HAS_CO_AWAIT BOOST_ASIO_HAS_STD_COROUTINE)
endif()
add_compile_definitions(BOOST_ASIO_NO_DEPRECATED BOOST_BEAST_USE_STD_STRING_VIEW)

if(KVGATE_SANITIZE)
  set(_san "-fsanitize=${KVGATE_SANITIZE}")
  add_compile_options(${_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  # clang 14's -fsanitize=function cannot emit its prologue data for some coroutine functions
  # ("Cannot represent a difference across sections"), and kvgate's I/O is coroutines.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND KVGATE_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize=function)
  endif()
  add_link_options(${_san})
  set(KVGATE_JEMALLOC OFF CACHE BOOL "jemalloc is incompatible with sanitizers" FORCE)
endif()

# Under a sanitizer kvgate compiles at -O0, and so does test code (tests/, kvgate_test_folder())
# in every tree, but for the folders that call kvgate_compute_bound_folder() (core, index,
# events, tokenizer, the index's and tokenizer's tests, the drills' load generators), which keep
# the build's optimization (-O1 under a sanitizer, -O2 in release). At -O1 clang spends about 4x
# as long optimizing the thousands of Asio/Beast composed-operation instantiations of the I/O
# code (src/http/server.cc: 263 s against 69 s under ASan), whose tests wait on sockets and
# timers; the compute-bound tests (the index's exactness and race harnesses, the tokenizer's
# references, the event decoder's fuzzer) spend their time in the folders that keep it.
if(KVGATE_SANITIZE)
  add_compile_options(-O0)
endif()
macro(kvgate_test_folder)
  if(KVGATE_SANITIZE OR CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
    add_compile_options(-O0)
  endif()
endmacro()
macro(kvgate_compute_bound_folder)
  if(KVGATE_SANITIZE)
    add_compile_options(-O1)
  elseif(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
    add_compile_options(-O2)
  endif()
endmacro()

# libFuzzer's coverage instrumentation (-fsanitize=fuzzer-no-link) goes only on the libraries a
# fuzz target calls into, where the fuzz target is defined (tests/events): on the whole tree it
# would slow every compile of an asan build for no gain.
