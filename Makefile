# kvgate's front door. `make demo` and `make test` do all set-up on a fresh Debian 12 machine (as root).
# Everything else: `make help`.
SHELL := /bin/bash
PRESET ?= release
BUILD_DIR := build/$(PRESET)
CTEST_JOBS ?= 2
FORMAT_FILES = git ls-files --cached --others --exclude-standard -- '*.h' '*.cc' '*.cpp'

.PHONY: help setup configure build test demo bench format format-check asan tsan fuzz clean

help:
	@echo "make demo          set up, build, run a mock fleet behind the gateway, print a report"
	@echo "make test          set up, build, run every test (ctest)"
	@echo "make build         set up and build the release preset (PRESET=debug|asan|tsan to change)"
	@echo "make bench         build and run every benchmark briefly (results: bench-out/)"
	@echo "make asan | tsan   build and test under ASan+UBSan | ThreadSanitizer (clang 14, asserts on;"
	@echo "                   every test but those whose pass rule is a timing (label timing);"
	@echo "                   tsan also not the gRPC servers' tests, label grpc, nor those"
	@echo "                   that start no thread, label single_thread)"
	@echo "make fuzz          build the libFuzzer targets and run each for FUZZ_SECONDS (default 60)"
	@echo "make format        clang-format every C++ file in place; make format-check only checks"

setup:
	@tools/setup.sh

configure: setup
	@if [ ! -f $(BUILD_DIR)/build.ninja ]; then cmake --preset $(PRESET); fi

build: configure
	@cmake --build $(BUILD_DIR)

test: build
	@ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(CTEST_JOBS) $(CTEST_ARGS)

demo: build
	@tools/demo.sh $(BUILD_DIR)

bench: build
	@tools/bench.sh $(BUILD_DIR)

# Every test but those whose pass rules are timings a sanitizer's slowdown would bend (label
# timing: the fault drills, the routing-quality runs, the mock's publisher delay); they run on the
# release build. Other tests scale their wall-clock bounds by testing_support::kSlowdown.
asan:
	@$(MAKE) --no-print-directory test PRESET=asan CTEST_ARGS="-LE 'drill|timing' $(CTEST_ARGS)"

# Under ThreadSanitizer also not the gRPC servers' tests (label grpc): Debian's gRPC is not built
# with it, so its synchronization is invisible and every call reports races inside gRPC. What the
# relay shares between threads without gRPC (RankStream) has its own stress test there. Nor the
# tests that start no thread (label single_thread): a race needs two, and ASan runs them.
tsan:
	@$(MAKE) --no-print-directory test PRESET=tsan CTEST_ARGS="-LE 'drill|timing|grpc|single_thread' $(CTEST_ARGS)"

fuzz: setup
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-60} bash tools/ci-extra/fuzz.sh

format:
	@$(FORMAT_FILES) | xargs -r clang-format -i

format-check:
	@$(FORMAT_FILES) | xargs -r clang-format --dry-run -Werror && echo "format-check: clean"

clean:
	rm -rf build
