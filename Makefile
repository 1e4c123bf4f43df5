# StoreBus: the two commands of the README are `make run` and `make test`.
# Both install the system packages they need (libzmq3-dev, protobuf-compiler) when missing.

SWIFT       ?= swift
# Debug builds without debug information: on a new clone of the 2-core CI machine the test bundle
# built in 729 s without it against 800 s with it, and lldb does not run on the machines this
# builds on. `make test SWIFT_BUILD_FLAGS=` keeps it.
SWIFT_BUILD_FLAGS ?= -debug-info-format none
PROTO_DIR   := proto-schemas
GEN_DIRS    := StoreSchema/Generated StoreBus/Generated StoreBusServer/Generated
APT_PACKAGES := libzmq3-dev libsqlite3-dev protobuf-compiler pkg-config
SUDO        := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BIN         := .build/debug
# Apple's App Store Server Library for Python: the receipt tests verify StoreBus's signed
# transactions with it (scripts/apple-library-check.py).
PYTHON_TOOLS := .build/python-tools
APPLE_LIBRARY_VERSION := 3.1.2
# pyzmq: deploy/examples/python_backend.py, run by the notification tests.
PYZMQ_VERSION := 26.2.0
# axe-core 4.4.3's script (axe.min.js), which the console's browser test runs in each page.
AXE_CORE_PYTHON_VERSION := 0.1.0

.PHONY: deps test-deps build run test chaos screenshots generators protos check-protos format check-format bench clean

## deps: install libzmq3-dev, libsqlite3-dev (GRDB and StoreBusStorage link it), protobuf-compiler and
## pkg-config from Debian when any is missing.
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

# A bare `swift build` builds every product of every dependency, swift-protobuf's C++ protoc among
# them (minutes of C++). These lists name what is needed.
RUN_PRODUCTS  := storebus-catalog storebus-payment-queue storebus-receipt storebus-download storebus-notifications storebus-gateway storebus-console storectl
TEST_PRODUCTS := StoreBusPackageTests storebus-catalog storebus-payment-queue storebus-receipt storebus-download storebus-notifications storebus-gateway storebus-console storectl storebus-testkit-journal storebus-testkit-restrict-families storebus-testkit-probe storebus-testkit-echo storebus-bench

build: deps
	@for product in $(RUN_PRODUCTS); do $(SWIFT) build $(SWIFT_BUILD_FLAGS) --product $$product || exit 1; done

## run: build and start every StoreBus service on the embedded defaults (Ctrl-C stops them all).
run: build
	@deploy/run-local

## test-deps: what the tests need besides: systemd-analyze (Debian's systemd) checks deploy/systemd's
## units; openssl and Apple's app-store-server-library (PyPI, in a virtual environment under .build/)
## check receipts and signed transactions as other tools see them, and pyzmq runs the Python backend
## example; iproute2 and tcpdump make and
## watch the multi-host test's network namespaces; postgresql-15 is the server the PostgreSQL
## storage tests start (each its own, under a temporary directory), and pg_auto_failover
## (postgresql-15-auto-failover, pg-auto-failover-cli) keeps the primary and standby of the failover test;
## chromium and chromium-driver are the browser the console's tests drive, and axe-core-python (PyPI)
## carries the axe-core script that checks each page's accessibility in it.
test-deps: deps
	@missing=""; for p in systemd openssl python3-venv iproute2 tcpdump curl postgresql-15 postgresql-15-auto-failover pg-auto-failover-cli chromium chromium-driver; do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; fi
	@$(PYTHON_TOOLS)/bin/python -c "import appstoreserverlibrary, zmq, axe_core_python" 2>/dev/null || { \
	  echo "installing: app-store-server-library $(APPLE_LIBRARY_VERSION), pyzmq $(PYZMQ_VERSION) and axe-core-python $(AXE_CORE_PYTHON_VERSION) (PyPI) into $(PYTHON_TOOLS)"; \
	  rm -rf $(PYTHON_TOOLS) && python3 -m venv $(PYTHON_TOOLS) && \
	  $(PYTHON_TOOLS)/bin/pip install -q --disable-pip-version-check app-store-server-library==$(APPLE_LIBRARY_VERSION) pyzmq==$(PYZMQ_VERSION) \
	    axe-core-python==$(AXE_CORE_PYTHON_VERSION); }

## test: every test, after checking that the committed generated code matches proto-schemas/.
## Each test target runs in a process of its own (scripts/run-tests says why).
test: test-deps check-protos check-format
	@for product in $(TEST_PRODUCTS); do $(SWIFT) build $(SWIFT_BUILD_FLAGS) --product $$product || exit 1; done
	scripts/run-tests

## screenshots: the console's pages as the browser test shows them, written to docs/console/.
screenshots: test-deps
	@for product in $(TEST_PRODUCTS); do $(SWIFT) build $(SWIFT_BUILD_FLAGS) --product $$product || exit 1; done
	STOREBUS_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console .build/debug/StoreBusPackageTests.xctest --testing-library swift-testing --filter ConsoleBrowserTests

## chaos: the scale-out chaos test (DeploymentTests' ScaleOutChaosTests) alone, with 20 rounds of faults
## (STOREBUS_CHAOS_ROUNDS=N for another number; `make test` runs 2): about 20 s a round.
chaos: test-deps
	@for product in $(TEST_PRODUCTS); do $(SWIFT) build $(SWIFT_BUILD_FLAGS) --product $$product || exit 1; done
	STOREBUS_CHAOS_ROUNDS=$${STOREBUS_CHAOS_ROUNDS:-20} .build/debug/StoreBusPackageTests.xctest --testing-library swift-testing --filter ScaleOutChaosTests

# The generators: protoc-gen-swift (swift-protobuf) for messages, protoc-gen-storebus (ours) for
# method descriptors. Both are built from this package, in debug mode (fast to build).
generators: deps
	@$(SWIFT) build $(SWIFT_BUILD_FLAGS) --product protoc-gen-swift >/dev/null
	@$(SWIFT) build $(SWIFT_BUILD_FLAGS) --product protoc-gen-storebus >/dev/null


## protos: regenerate the Generated folders of StoreSchema, StoreBus and StoreBusServer from
## proto-schemas/ (commit the result).
protos: generators
	scripts/generate-protos Sources

## check-protos: fail when the committed generated code differs from what proto-schemas/ generates.
check-protos: generators
	@tmp=$$(mktemp -d); \
	scripts/generate-protos $$tmp/gen; \
	drift=""; for dir in $(GEN_DIRS); do diff -r $$tmp/gen/$$dir Sources/$$dir >>$$tmp/diff || drift="$$drift Sources/$$dir"; done; \
	if [ -z "$$drift" ]; then echo "generated code matches proto-schemas/"; rm -rf $$tmp; \
	else head -40 $$tmp/diff; echo "error:$$drift out of date; run 'make protos' and commit"; rm -rf $$tmp; exit 1; fi

# The hand-written Swift (generated code is protoc's and protoc-gen-swift's), as swift-format
# (bundled with the toolchain) formats it with .swift-format.
FORMATTED := $(shell find Sources Tests -name '*.swift' -not -path '*/Generated/*' 2>/dev/null | LC_ALL=C sort)

## format: format the hand-written Swift in place (swift format, .swift-format).
format:
	@$(SWIFT) format format --in-place --parallel $(FORMATTED)

## check-format: fail when a hand-written Swift file is not as `make format` leaves it.
check-format:
	@out=$$($(SWIFT) format lint --strict --parallel $(FORMATTED) 2>&1); 	if [ -z "$$out" ]; then echo "Swift sources are formatted"; 	else echo "$$out" | head -20; echo "error: run 'make format' and commit"; exit 1; fi

## bench: release build, then every benchmark as `<metric> <value> <unit>` lines.
bench: deps
	@for product in storebus-bench storebus-catalog storebus-payment-queue storebus-receipt storebus-download storebus-notifications storebus-gateway; do $(SWIFT) build -c release --product $$product || exit 1; done
	.build/release/storebus-bench

clean:
	rm -rf .build
