# kvgate_add_module(<name> SOURCES ... DEPS ... [PRIVATE_DEPS ...])
#   One static library kvgate_<name> per module: public headers in include/kvgate/<name>/,
#   sources and internal headers in src/<name>/. DEPS are linked PUBLIC (module headers may expose
#   them).
#
#   The walls: only include/ is on another target's include path. A module's own sources reach its
#   internal headers as "<name>/..." through a folder in the build tree that links to src/<name>
#   alone, so no module can include another's internals. White-box tests and benches link
#   kvgate::<name>_internals, which adds that folder (cmake/KvgateWalls.cmake checks that nothing
#   else does).
#   DIR names the folder when two libraries share one (mock_engine lives in src/mock).
function(kvgate_add_module name)
  cmake_parse_arguments(ARG "" "DIR" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  if(NOT ARG_DIR)
    set(ARG_DIR ${name})
  endif()
  set(private_root "${PROJECT_BINARY_DIR}/internals/${name}")
  file(MAKE_DIRECTORY "${private_root}")
  if(NOT EXISTS "${private_root}/${ARG_DIR}")
    file(CREATE_LINK "${PROJECT_SOURCE_DIR}/src/${ARG_DIR}" "${private_root}/${ARG_DIR}" SYMBOLIC)
  endif()
  add_library(kvgate_${name} STATIC ${ARG_SOURCES})
  add_library(kvgate::${name} ALIAS kvgate_${name})
  target_include_directories(kvgate_${name}
    PUBLIC  ${PROJECT_SOURCE_DIR}/include
    PRIVATE ${private_root})
  target_link_libraries(kvgate_${name} PUBLIC ${ARG_DEPS} PRIVATE kvgate_project_options ${ARG_PRIVATE_DEPS})
  add_library(kvgate_${name}_internals INTERFACE)
  add_library(kvgate::${name}_internals ALIAS kvgate_${name}_internals)
  target_include_directories(kvgate_${name}_internals INTERFACE ${private_root})
  target_link_libraries(kvgate_${name}_internals INTERFACE kvgate_${name} ${ARG_PRIVATE_DEPS})
  set_property(GLOBAL APPEND PROPERTY KVGATE_MODULE_TARGETS kvgate_${name})
  set_property(TARGET kvgate_${name} PROPERTY KVGATE_MODULE_DEPS "${ARG_DEPS}")
endfunction()

# kvgate_add_binary(<target> SOURCES ... DEPS ...)
#   An executable that gets jemalloc (with background purge) unless KVGATE_JEMALLOC is off.
function(kvgate_add_binary target)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE kvgate_project_options ${ARG_DEPS})
  kvgate_link_allocator(${target})
endfunction()

function(kvgate_link_allocator target)
  if(KVGATE_JEMALLOC)
    target_link_libraries(${target} PRIVATE kvgate_jemalloc_config PkgConfig::JEMALLOC)
  endif()
endfunction()

# kvgate_add_test(<target> SOURCES ... DEPS ... [LABELS ...] [TIMEOUT s] [ARGS ...])
#   A GoogleTest binary registered with ctest as one test (gtest's own filtering stays available).
function(kvgate_add_test target)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS;ARGS" ${ARGN})
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE kvgate_project_options ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  set_property(TARGET ${target} PROPERTY KVGATE_TEST TRUE)
  kvgate_link_allocator(${target})
  add_test(NAME ${target} COMMAND ${target} ${ARG_ARGS})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  set_tests_properties(${target} PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  kvgate_test_environment(${target})
  if(ARG_LABELS)
    set_tests_properties(${target} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()

# kvgate_test_environment(<test>)
#   What every test's process gets: where the sources and the build are, and under a sanitizer
#   preset its options (one suppression file for ThreadSanitizer, tests/tsan.supp; halt on the
#   first report) and a tenth-size run of the index's exactness harnesses, whose full size takes
#   minutes under a sanitizer's slowdown (the release build runs them whole).
function(kvgate_test_environment test)
  set(env "KVGATE_SOURCE_DIR=${PROJECT_SOURCE_DIR}" "KVGATE_BINARY_DIR=${PROJECT_BINARY_DIR}")
  if(KVGATE_SANITIZE)
    # KVGATE_SANITIZER: for scripts whose memory bounds a sanitizer's allocator would bend.
    list(APPEND env "KVGATE_EXACTNESS_SCALE=0.1" "KVGATE_SANITIZER=${KVGATE_SANITIZE}")
  endif()
  if(KVGATE_SANITIZE MATCHES "thread")
    list(APPEND env
      "TSAN_OPTIONS=halt_on_error=1 second_deadlock_stack=1 suppressions=${PROJECT_SOURCE_DIR}/tests/tsan.supp")
  elseif(KVGATE_SANITIZE MATCHES "address")
    list(APPEND env "ASAN_OPTIONS=halt_on_error=1 detect_leaks=1"
      "UBSAN_OPTIONS=halt_on_error=1 print_stacktrace=1")
  endif()
  set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT ${env})
endfunction()
