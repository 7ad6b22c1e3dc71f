# User-facing build switches. Presets in CMakePresets.json set them per mode.
option(KVGATE_BUILD_TESTS "Build unit and integration tests" ON)
option(KVGATE_BUILD_BENCH "Build benchmarks (Google Benchmark and the index harness)" ON)
option(KVGATE_BUILD_DRILLS "Build the fault drills (timing-bound; the sanitizer presets skip them)" ON)
option(KVGATE_BUILD_FUZZ "Build libFuzzer targets (clang only)" OFF)
option(KVGATE_JEMALLOC "Link jemalloc into every binary (off under sanitizers)" ON)
option(KVGATE_WERROR "Treat warnings in kvgate's own code as errors" ON)
option(KVGATE_THREAD_SAFETY "Check lock annotations with clang -Wthread-safety" ON)
set(KVGATE_SANITIZE "" CACHE STRING "Sanitizers: '' | address,undefined | thread")

# Unity builds: each target's sources compile in batches of 16, so the Beast/Asio coroutine
# templates most files instantiate are compiled once per batch instead of once per file (about
# half the build's CPU time; file-local names must therefore be unique within a target).
option(KVGATE_UNITY_BUILD "Compile each target's sources in batches (faster clean builds)" ON)
if(KVGATE_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 16)
endif()
