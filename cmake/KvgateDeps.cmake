# Every third-party dependency, all from Debian 12 packages (tools/setup.sh installs them).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(msgpack CONFIG REQUIRED)          # target msgpackc-cxx
find_package(cppzmq CONFIG REQUIRED)           # target cppzmq
find_package(simdjson CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(GTest CONFIG REQUIRED)
find_package(benchmark CONFIG REQUIRED)
find_package(OpenSSL REQUIRED)                 # SHA-256 for the engines' hash schemes
find_package(Protobuf REQUIRED)                # the relay's messages (proto/)
find_package(gRPC CONFIG REQUIRED)             # the relay's service; gRPC::grpc_cpp_plugin
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(NUMA REQUIRED IMPORTED_TARGET numa)
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)     # state sync between replicas
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)   # the tokenizers' split patterns
pkg_check_modules(ICU REQUIRED IMPORTED_TARGET icu-uc icu-i18n) # Unicode normalization, classes
pkg_check_modules(YAMLCPP REQUIRED IMPORTED_TARGET yaml-cpp)     # kubeconfigs, --config files
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd)  # sd_notify (Type=notify)
pkg_check_modules(JEMALLOC IMPORTED_TARGET jemalloc)
if(KVGATE_JEMALLOC AND NOT JEMALLOC_FOUND)
  message(FATAL_ERROR "jemalloc not found: run tools/setup.sh or configure with -DKVGATE_JEMALLOC=OFF")
endif()

# Asio/Beast as one header-only target with the project's definitions.
add_library(kvgate_asio INTERFACE)
target_link_libraries(kvgate_asio INTERFACE Boost::headers Threads::Threads)
