# Two entry points (see README): `make demo` and `make test`. Both install
# what is missing (scripts/install-deps.sh, idempotent), configure and build.

BUILD_DIR ?= build
JOBS ?= 2
MLIR_DIR ?= /usr/lib/llvm-22/lib/cmake/mlir
LIT ?= /usr/lib/llvm-22/bin/lit
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all deps configure build test demo docs clean

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

docs: configure
	cmake --build $(BUILD_DIR) --target zest-doc

clean:
	rm -rf $(BUILD_DIR)
