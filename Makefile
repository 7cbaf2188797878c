# nnfleet's entry points. `make demo` and `make test` first install what is missing
# (scripts/setup), then configure and build in Release, leaving the tool at build/nnfleet.
#   make demo        train the example fleet (examples/fashion-mnist.yaml) with the live display
#                    and its HTML report (runs/demo-*/report.html)
#   make forecast    W4: one LSTM, GRU and Conv1D forecaster per series (examples/forecast.yaml),
#                    its 32 series written by tools/make_w4_series.py into $(BUILD)/bench-data/w4
#   make test        every test (unit, golden, fleet, I/O and the W1 accuracy check), then the
#                    source checks (make check) and a short run of every fuzzer (make fuzz-short)
#   make check       the layering of src/ from the #include lines (scripts/check_layering) and the
#                    C++ formatting (scripts/check_format: clang-format-14, .clang-format)
#   make python      make build (which builds the Python module nnfleet too), then `import nnfleet`
#                    works in this user's /usr/bin/python3: one file, nnfleet.pth in the user
#                    site-packages (python3 -m site --user-site), naming $(BUILD)/python; it says
#                    so. make python-undo removes it. (To install into a venv instead, with the
#                    `nnfleet` command: pip install --no-build-isolation ., README.)
#   make test-quick  the tests without the long W1 accuracy check (and without fuzzing)
#   make asan        the tests in a separate AddressSanitizer + UBSan build (build-asan/)
#   make fuzz        every libFuzzer harness for 5 minutes (FUZZ_SECONDS=300) in build-fuzz/
#   make fuzz-short  the same for FUZZ_SHORT_SECONDS=15 each, as `make test` runs it
#   make build       configure and build only
#   make bench       the benchmark against the peers into BENCHMARKS.md (ARGS=--quick: < 5 min)
BUILD ?= build
JOBS ?= $(shell nproc)
# The Python that make python and make python-undo change (the one the build's module is for).
PYTHON3 ?= /usr/bin/python3
CMAKE_FLAGS ?=
ifeq ($(CI),true)
  CMAKE_FLAGS += -DNNFLEET_WERROR=ON
endif

.PHONY: setup build python python-undo demo forecast forecast-data test test-quick check asan clean bench fuzz-build fuzz fuzz-short

setup:
	scripts/setup
	scripts/setup_ort $(BUILD)

build: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

python: build
	$(PYTHON3) scripts/python_pth add "$(abspath $(BUILD))/python"
	cd / && $(PYTHON3) -c 'import nnfleet; print("import nnfleet: ok,", nnfleet.__file__)'

python-undo:
	$(PYTHON3) scripts/python_pth remove

demo: build
	$(BUILD)/nnfleet train examples/fashion-mnist.yaml --report --out runs/demo-$$(date +%Y%m%d-%H%M%S)

# examples/forecast.yaml reads build/bench-data/w4/ (relative to examples/), whatever BUILD is.
forecast-data:
	scripts/setup --forecast
	/usr/bin/python3 tools/make_w4_series.py build/bench-data/w4

forecast: build forecast-data
	$(BUILD)/nnfleet train examples/forecast.yaml --out runs/forecast-$$(date +%Y%m%d-%H%M%S)

test: build
	@if [ -f $(BUILD)/real_files_absent.txt ]; then cat $(BUILD)/real_files_absent.txt; fi
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 1200
	$(MAKE) --no-print-directory check
	$(MAKE) --no-print-directory fuzz-short

test-quick: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE long

# Both checks run (and both report) before the result says whether either failed.
check:
	@rc=0; scripts/check_layering || rc=1; scripts/check_format || rc=1; exit $$rc

asan: setup
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DNNFLEET_SANITIZE=address,undefined -DNNFLEET_BENCH=OFF -DNNFLEET_PYTHON=OFF -DNNFLEET_PCH=OFF $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS) -LE long

clean:
	rm -rf $(BUILD) build-asan build-fuzz

# libFuzzer harnesses (fuzz/): clang from Debian, ASan + UBSan, only the libraries they need.
# Found inputs stay in build-fuzz/fuzz-corpus/; crashes go to build-fuzz/fuzz-crashes/.
FUZZ_SECONDS ?= 300
FUZZ_SHORT_SECONDS ?= 15
FUZZ_CMAKE = cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DNNFLEET_FUZZ=ON \
  -DNNFLEET_SANITIZE=address,undefined -DNNFLEET_TESTS=OFF -DNNFLEET_BENCH=OFF -DNNFLEET_MPI=OFF -DNNFLEET_PYTHON=OFF -DNNFLEET_PCH=OFF
# Warnings are errors for the project's compiler (GCC) in CI; the clang-built fuzzers only warn.
fuzz-build:
	scripts/setup --fuzz
	$(FUZZ_CMAKE) $(CMAKE_FLAGS) -DNNFLEET_WERROR=OFF
	cmake --build build-fuzz -j $(JOBS) --target fuzzers

fuzz: fuzz-build
	scripts/fuzz --seconds $(FUZZ_SECONDS) --jobs $(JOBS)

fuzz-short: fuzz-build
	scripts/fuzz --seconds $(FUZZ_SHORT_SECONDS) --jobs $(JOBS)

# The benchmark (bench/run_bench.py): nnfleet against its peers (PyTorch, ONNX Runtime, Optuna) on
# W1 to W5, interleaved rounds, medians into BENCHMARKS.md. ARGS=--quick runs the same structure on
# less work and writes $(BUILD)/bench/BENCHMARKS-quick.md instead.
ARGS ?=
bench:
	scripts/setup --bench
	$(MAKE) --no-print-directory build
	bench/setup_peers.sh $(BUILD) || echo "make bench: bench/setup_peers.sh failed; the bench reports what is missing"
	/usr/bin/python3 bench/run_bench.py --build $(BUILD) $(ARGS)
