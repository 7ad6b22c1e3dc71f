# kvgate_add_module(<name> SOURCES ... DEPS ...)
#   One static library kvgate_<name> per module: public headers in include/kvgate/<name>/,
#   sources in src/<name>/. DEPS are linked PUBLIC (module headers may expose them).
function(kvgate_add_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(kvgate_${name} STATIC ${ARG_SOURCES})
  add_library(kvgate::${name} ALIAS kvgate_${name})
  target_include_directories(kvgate_${name}
    PUBLIC  ${PROJECT_SOURCE_DIR}/include
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(kvgate_${name} PUBLIC ${ARG_DEPS} PRIVATE kvgate_project_options ${ARG_PRIVATE_DEPS})
endfunction()

# kvgate_add_binary(<target> SOURCES ... DEPS ...)
#   An executable that gets jemalloc (with background purge) unless KVGATE_JEMALLOC is off.
function(kvgate_add_binary target)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE kvgate_project_options ${ARG_DEPS})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
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
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  kvgate_link_allocator(${target})
  add_test(NAME ${target} COMMAND ${target} ${ARG_ARGS})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  set_tests_properties(${target} PROPERTIES TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "KVGATE_SOURCE_DIR=${PROJECT_SOURCE_DIR};KVGATE_BINARY_DIR=${PROJECT_BINARY_DIR}")
  if(ARG_LABELS)
    set_tests_properties(${target} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()
