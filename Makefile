# llmr: the two commands are `make run` and `make test`; everything else is here too.
#   make            build (installs missing Debian packages first)
#   make test       build and run every test that needs no GPU
#   make asan       build with AddressSanitizer + UndefinedBehaviorSanitizer and run the tests
#   make fuzz       build the libFuzzer targets and run each for FUZZ_SECONDS (default 60)
#   make run        build and start `llmr serve`
#   make gpu-bundle collect what a GPU machine needs to run the GPU tests into dist/gpu
#   make gpu-bundle-llama  the smaller set for the llama.cpp comparison, into dist/llama
#   make deps       install the missing Debian packages of the tests (make deps-run: of
#                   running only); idempotent
#   LLMR_LLAMA_CPP=source make ...  build llama.cpp from its pinned source instead of
#                   taking its prebuilt libraries; =OFF: no llama.cpp (no GGUF engine);
#                   see docs/llama-cpp.md
#   LLMR_DASHBOARD=OFF make ...  build without the web dashboard; see docs/dashboard.md
#   make clean      remove build directories

BUILD        ?= build
JOBS         ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 60
BUILD_TYPE   ?= RelWithDebInfo
NVCC         := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA_FLAGS   := $(if $(NVCC),-DCMAKE_CUDA_COMPILER=$(NVCC))

.PHONY: all build deps deps-run llama-cpp dashboard test asan fuzz run gpu-bundle gpu-bundle-llama clean

all: build

# `make`, `make run`: only what running needs; the test targets add theirs first.
deps-run:
	@scripts/timed.sh deps-run scripts/deps.sh run

deps:
	@scripts/timed.sh deps-test scripts/deps.sh test

build: deps-run llama-cpp dashboard
	@scripts/timed.sh configure cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CUDA_FLAGS) > $(BUILD).configure.log 2>&1 \
	  || { cat $(BUILD).configure.log; exit 1; }
	@grep '^-- llmr:\|^phase' $(BUILD).configure.log || true
	@scripts/timed.sh compile cmake --build $(BUILD) -j $(JOBS)
	@scripts/timed.sh tokenizer scripts/fetch-gpt-oss-tokenizer.sh $(BUILD)/data/gpt-oss $(BUILD)/llama.cpp/src || true

# The dashboard's web app, built from pinned npm packages into $(BUILD)/dashboard, which
# the build embeds in llmr (scripts/build-dashboard.sh).
dashboard: deps-run
	@$(if $(filter OFF,$(LLMR_DASHBOARD)),echo "dashboard: not built (LLMR_DASHBOARD=OFF)",scripts/timed.sh dashboard scripts/build-dashboard.sh $(BUILD))

# llama.cpp, pinned: its prebuilt libraries (or, with LLMR_LLAMA_CPP=source, a build
# from source), once per machine into a cache (scripts/llama-cpp.sh).
llama-cpp: deps-run
	@$(if $(filter OFF,$(LLMR_LLAMA_CPP)),echo "llama.cpp: left out (LLMR_LLAMA_CPP=OFF)",scripts/timed.sh llama.cpp scripts/llama-cpp.sh $(BUILD))

test: deps build
	@scripts/timed.sh tests ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

asan: deps
	@$(if $(filter OFF,$(LLMR_LLAMA_CPP)),true,LLMR_LLAMA_CUDA=OFF scripts/llama-cpp.sh build-asan)
	@$(if $(filter OFF,$(LLMR_DASHBOARD)),true,scripts/build-dashboard.sh build-asan)
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLLMR_SANITIZE=ON -DLLMR_CUDA=OFF > build-asan.configure.log 2>&1 \
	  || { cat build-asan.configure.log; exit 1; }
	@cmake --build build-asan -j $(JOBS)
	@scripts/fetch-gpt-oss-tokenizer.sh build-asan/data/gpt-oss build-asan/llama.cpp/src || true
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir build-asan --output-on-failure -j $(JOBS)

fuzz: deps
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DLLMR_FUZZ=ON -DLLMR_CUDA=OFF > build-fuzz.configure.log 2>&1 \
	  || { cat build-fuzz.configure.log; exit 1; }
	@cmake --build build-fuzz -j $(JOBS)
	@scripts/run-fuzzers.sh build-fuzz $(FUZZ_SECONDS)

run: build
	$(BUILD)/llmr serve

gpu-bundle: build
	@scripts/gpu-bundle.sh $(BUILD) dist/gpu

gpu-bundle-llama: build
	@scripts/gpu-bundle-llama.sh $(BUILD) dist/llama

clean:
	rm -rf build build-asan build-fuzz dist *.configure.log
