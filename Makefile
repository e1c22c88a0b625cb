# Two commands matter: `make run` and `make test`. Both install the system packages they need.
SWIFT ?= swift
POLICIES ?= policies

.PHONY: run test deps build check bench clean

deps:
	@./scripts/install-deps.sh

build: deps
	$(SWIFT) build -c release --product portico

## Build and run the gateway on the shipped policy, with the demo backends it points at.
run: build
	.build/release/portico serve --policies $(POLICIES) --demo-backends

## Run every test (unit and end-to-end, on loopback).
test: deps
	$(SWIFT) test

## Validate a policy directory: make check POLICIES=path
check: build
	.build/release/portico check $(POLICIES)

## Compare Portico with nginx as reverse proxies in front of the same backend (see bench/README.md).
bench: deps
	./bench/run.sh

clean:
	rm -rf .build
