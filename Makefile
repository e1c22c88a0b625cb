# Two commands matter: `make run` and `make test`. Both install the system packages they need.
SWIFT ?= swift
POLICIES ?= policies

.PHONY: run test deps build check bench clean format lint

deps:
	@./scripts/install-deps.sh

build: deps
	$(SWIFT) build -c release --product portico

## Build and run the gateway on the shipped policy, with the demo backends it points at.
run: build
	.build/release/portico serve --policies $(POLICIES) --demo-backends

## Check formatting, then run every test (unit and end-to-end, on loopback).
test: deps lint
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
	.build/release/portico check $(POLICIES)

## Compare Portico with nginx as reverse proxies in front of the same backend (see bench/README.md).
bench: deps
	./bench/run.sh

clean:
	rm -rf .build
