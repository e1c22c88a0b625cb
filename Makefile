# Two commands matter: `make run` and `make test`. Both install the system packages they need.
SWIFT ?= swift
POLICIES ?= policies

.PHONY: run test deps build check bench microbench clean format lint

deps:
	@./scripts/install-deps.sh

# Whole-program cross-module optimisation: lets the compiler specialise generic code from dependencies
# (swift-http-structured-headers' parser runs ~15x faster specialised; see bench/README.md).
RELEASE_FLAGS ?= -Xswiftc -cross-module-optimization

build: deps
	$(SWIFT) build -c release --product portico $(RELEASE_FLAGS)

## Build and run the gateway on the shipped policy, with the demo backends it points at.
run: build
	./certs/make-dev-certs.sh
	.build/release/portico serve --policies $(POLICIES) --demo-backends

## Check formatting, then run every test (unit and end-to-end, on loopback).
test: deps lint
	@./scripts/interop/setup.sh
	$(SWIFT) test

## Formatting is swift-format's job (configuration in .swift-format).
format:
	$(SWIFT) format -i -r Sources Tests Package.swift

lint:
	@if $(SWIFT) format --version >/dev/null 2>&1; then \
		$(SWIFT) format lint --strict -r Sources Tests Package.swift; \
	else echo "swift-format not found: skipping the formatting check"; fi

## Validate a policy directory: make check POLICIES=path
check: build
	./certs/make-dev-certs.sh
	.build/release/portico check $(POLICIES)

## Compare Portico with nginx as reverse proxies in front of the same backend (see bench/README.md).
bench: deps
	./bench/run.sh

## Micro-benchmarks (ordo-one/benchmark) of signature verification and its parts.
microbench: deps
	$(SWIFT) package --package-path bench/micro $(RELEASE_FLAGS) benchmark

clean:
	rm -rf .build
