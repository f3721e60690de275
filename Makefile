# Two entry points (see README): `make demo` and `make test`. Both install
# what is missing (scripts/install-deps.sh, idempotent), configure and build.

BUILD_DIR ?= build
JOBS ?= 2
MLIR_DIR ?= /usr/lib/llvm-22/lib/cmake/mlir
LIT ?= /usr/lib/llvm-22/bin/lit
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all deps configure build test demo docs sanitize clean

all: build

deps:
	./scripts/install-deps.sh

configure: deps
	cmake -G Ninja -S . -B $(BUILD_DIR) -DMLIR_DIR=$(MLIR_DIR) \
	  -DLLVM_EXTERNAL_LIT=$(LIT) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

demo: build
	./scripts/demo.sh $(BUILD_DIR)

# The runtime, the training program and the checkpoint code under
# AddressSanitizer (leaks included) and UndefinedBehaviorSanitizer, in a build
# tree of their own, and the end-to-end and runtime tests run under them.
SANITIZE_DIR ?= build-sanitize
SANITIZERS ?= address,undefined
sanitize: deps
	cmake -G Ninja -S . -B $(SANITIZE_DIR) -DMLIR_DIR=$(MLIR_DIR) \
	  -DLLVM_EXTERNAL_LIT=$(LIT) $(CMAKE_FLAGS) -DZEST_SANITIZE=$(SANITIZERS)
	cmake --build $(SANITIZE_DIR) -j $(JOBS)
	cc -shared -fPIC -o $(SANITIZE_DIR)/no-dlclose.so scripts/no-dlclose.c
	cd $(SANITIZE_DIR) && \
	  LD_PRELOAD=$(CURDIR)/$(SANITIZE_DIR)/no-dlclose.so \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:verify_asan_link_order=0:fast_unwind_on_malloc=0 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -R 'lit/(E2E|Runtime)/'

docs: configure
	cmake --build $(BUILD_DIR) --target zest-doc

clean:
	rm -rf $(BUILD_DIR) $(SANITIZE_DIR)
