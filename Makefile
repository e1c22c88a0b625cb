# Two commands matter: `make run` and `make test`. Both install the system packages they need.
SWIFT ?= swift
POLICIES ?= policies

.PHONY: run test deps build check bench microbench clean format lint fuzz fuzz-build fuzz-smoke

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

## Check formatting, then run every test (unit and end-to-end, on loopback): the JVM and JavaScript
## signers' own tests first, then Swift's (whose live checks run those signers against the gateway).
##
## Swift Testing starts every test at once by default: 858 of them on a 2-core machine, where a
## test's own deadlines (a backend's timeout, a browser's answer, a signature's lifetime) then
## measure the others' load. Four at a time takes as long in all (87 s against 80 s here) and
## passed beside `stress-ng --cpu 2`, where all at once did not. TEST_WIDTH= (empty) lifts the cap.
TEST_WIDTH ?= 4
test: deps lint
	@./scripts/interop/setup.sh
	./clients/jvm/test.sh
	./clients/js/test.sh
	$(if $(TEST_WIDTH),SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(TEST_WIDTH)) $(SWIFT) test

## Formatting is swift-format's job (configuration in .swift-format).
format:
	$(SWIFT) format -i -r Sources Tests Package.swift fuzz/targets/Sources fuzz/targets/Package.swift

lint:
	@if $(SWIFT) format --version >/dev/null 2>&1; then \
		$(SWIFT) format lint --strict -r Sources Tests Package.swift fuzz/targets/Sources fuzz/targets/Package.swift; \
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

## libFuzzer targets (fuzz/README.md): a package of their own, built with libFuzzer and AddressSanitizer.
FUZZ_PACKAGE := fuzz/targets
FUZZ_TARGETS ?= FuzzSignatureFields FuzzPolicyLoader FuzzPathNormalizer FuzzGatewayHead FuzzHTTP2Connection FuzzCacheFields \
	FuzzBearerToken FuzzSigV4Request FuzzEventStream FuzzBackendResponse FuzzClientRequest
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_RUNS ?= 10000
# New corpus entries and crash artifacts go here, never into the committed fuzz/corpus.
FUZZ_SCRATCH ?= .build/fuzz
FUZZ_BUILD_FLAGS := -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -enable-testing
# No Swift backtracer (its crash handler reads memory ASan guards; libFuzzer reports the crash),
# and the same hash seeds every run, so a saved input replays the same way.
FUZZ_ENV := SWIFT_BACKTRACE=enable=no SWIFT_DETERMINISTIC_HASHING=1

fuzz-build: deps
	$(SWIFT) build --package-path $(FUZZ_PACKAGE) $(FUZZ_BUILD_FLAGS)

## Fuzz each target for FUZZ_SECONDS, from the committed corpus; fails if any target crashed.
fuzz: fuzz-build
	@failed=""; for target in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_SCRATCH)/$$target/corpus; \
		echo "== $$target: $(FUZZ_SECONDS)s, new inputs in $(FUZZ_SCRATCH)/$$target"; \
		$(FUZZ_ENV) $(FUZZ_PACKAGE)/.build/release/$$target -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
			-dict=fuzz/dictionaries/$$target.dict -artifact_prefix=$(FUZZ_SCRATCH)/$$target/ -print_final_stats=1 \
			$(FUZZ_SCRATCH)/$$target/corpus fuzz/corpus/$$target || failed="$$failed $$target"; \
	done; \
	if [ -n "$$failed" ]; then echo "crashed:$$failed (inputs in $(FUZZ_SCRATCH)/<target>/crash-*)"; exit 1; fi

## CI: build the targets, replay the committed corpus and a few thousand mutations of it per target.
## Its summary is worded apart from a test runner's "N passed, N failed", which CI reads as the test count.
fuzz-smoke: fuzz-build
	@passed=0; failed=0; for target in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_SCRATCH)/$$target/corpus; \
		log=$(FUZZ_SCRATCH)/$$target/smoke.log; \
		if $(FUZZ_ENV) $(FUZZ_PACKAGE)/.build/release/$$target -runs=$(FUZZ_SMOKE_RUNS) -seed=1 -timeout=10 \
			-dict=fuzz/dictionaries/$$target.dict -artifact_prefix=$(FUZZ_SCRATCH)/$$target/ -print_final_stats=1 \
			$(FUZZ_SCRATCH)/$$target/corpus fuzz/corpus/$$target >$$log 2>&1; \
		then passed=$$((passed + 1)); echo "$$target: $$(grep -E '^Done' $$log)"; \
		else failed=$$((failed + 1)); tail -n 60 $$log; echo "$$target crashed; the input is in $(FUZZ_SCRATCH)/$$target/"; fi; \
	done; \
	echo "fuzz-smoke: $$passed of $$((passed + failed)) targets ran clean"; [ $$failed -eq 0 ]

clean:
	rm -rf .build $(FUZZ_PACKAGE)/.build
