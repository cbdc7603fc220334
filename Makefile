# augur — build, test, demo.
#   make          build/libaugur.so and build/augur
#   make test     every test: no tracked build product, test packages, go.mod
#                 tidy, C strictness, Go unit tests with -race, integration
#   make demo     a training-style reader with and without the shim
#   make sim-validate  augur sim against make bench's measured figures
#   make pgo      the compiler's profile of augur (cmd/augur/default.pgo), made again
GO      ?= go
BUILD   := build
TAGS    := netgo,osusergo
CSRC    := intercept.c $(wildcard preload/*.c)
CHDR    := $(wildcard preload/*.h)
GOSRC   := $(shell find . -name '*.go' -not -path './build/*') go.mod go.sum
CWARN   := -Wall -Wextra -Werror
# Go's build cache does not see a change of preload/segment.h in the cgo
# packages that include it, and kept building them with the old layout of
# the shared segment: the headers' hash in CGO_CFLAGS is part of every cgo
# build's identity.
export CGO_CFLAGS := -O2 -g -DAUGUR_HEADERS=$(shell cat $(CHDR) | sha1sum | cut -c1-16)

.PHONY: all build test products unit cstrict integration deps tidy demo clean bench-shim
all: build
build: $(BUILD)/libaugur.so $(BUILD)/libaugur-go.so $(BUILD)/augur

# The preload: the data plane, plain C. It loads the Go half next to it
# only in a process that must read the configuration or may lead.
$(BUILD)/libaugur.so: $(CSRC) $(CHDR)
	@mkdir -p $(BUILD)
	gcc $(CWARN) -O2 -fPIC -fno-strict-aliasing -shared -o $@ $(CSRC) -ldl -pthread

$(BUILD)/libaugur-go.so: $(GOSRC) $(CHDR)
	$(GO) build -tags $(TAGS) -buildmode=c-shared -o $@ ./libaugur

$(BUILD)/augur: $(GOSRC) $(CHDR) cmd/augur/default.pgo
	$(GO) build -o $@ ./cmd/augur

# The data plane alone, with every warning an error, with and without
# _FORTIFY_SOURCE (which turns some libc names into macros).
cstrict:
	for f in $(CSRC); do \
	  gcc $(CWARN) -O2 -fPIC -fsyntax-only $$f || exit 1; \
	  gcc $(CWARN) -O2 -D_FORTIFY_SOURCE=2 -fPIC -fsyntax-only $$f || exit 1; \
	done

# The Debian packages the tests use (torch for seed/'s oracle tests, fio,
# fuse3, ...): installed before any test runs, so that a fresh machine
# passes.
deps:
	test/deps.sh

# go.mod and go.sum say exactly what the code imports.
tidy:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; exit 1; }

# sim links nothing of the data plane (no cgo, no shim): it must build
# and vet with CGO_ENABLED=0.
unit: deps
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) vet ./sim/ ./placement/
	test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test$$)

integration: build deps
	$(GO) test -count=1 -timeout 20m ./test/

test: products deps tidy cstrict unit integration

# No build product is tracked in git: an ELF file (executable, shared
# library, object), whatever its name, or a .so, .o, .a or .test.
products:
	@bad=$$( { git ls-files '*.so' '*.o' '*.a' '*.test'; \
	  git ls-files -z | xargs -0 -r sh -c 'for f; do [ -f "$$f" ] && \
	    [ "$$(head -c 4 "$$f" | od -An -tx1 | tr -d " \n")" = 7f454c46 ] && echo "$$f"; done' _; } | sort -u); \
	if [ -n "$$bad" ]; then echo "build products are tracked in git (git rm --cached them):"; echo "$$bad"; exit 1; fi

demo: build
	bench/demo.sh

clean:
	rm -rf $(BUILD)

# The shim's own overhead, side by side (issue 2's benchmark).
bench-shim: build
	$(GO) run ./bench/shimbench -instructions -json bench/results/shim.json

# The side-by-side comparison (issue 3): every configuration that exists so
# far over the emulated PFS in scenarios S1-S3, samples inside large files
# (L1-L6), then a PyTorch DataLoader;
# ratio tables on stdout and in bench/results/bench.txt, bench.json and bench.png. Root.
.PHONY: bench
$(BUILD)/dlreader: $(wildcard bench/c/dlreader/*)
	gcc -O2 $(CWARN) -pthread -o $@ $(wildcard bench/c/dlreader/*.c)

bench: build $(BUILD)/dlreader
	$(GO) run ./bench/compare -out bench/results

# Samples inside large files alone (issue 43): make bench's L1-L6, into
# bench/results/large/ (bench/results/bench.json stays make bench's).
# LARGE=L1,L4 picks scenarios; ROUNDS=3 runs the configurations in turn
# three times and gives medians.
.PHONY: bench-large
LARGE  ?= L
ROUNDS ?= 1
FROUNDS ?= 3
bench-large: build $(BUILD)/dlreader
	$(GO) run ./bench/compare -only $(LARGE) -large-rounds $(ROUNDS) -pytorch=false -out bench/results/large

# Fast sources alone (issue 44): make bench's F1-F2, small files from a
# page-cache-hot local disk and from a tmpfs, each policy beside plain
# reads, into bench/results/fast/.
.PHONY: bench-fast
bench-fast: build $(BUILD)/dlreader
	$(GO) run ./bench/compare -only F -fast-rounds $(FROUNDS) -pytorch=false -out bench/results/fast

# cmd/augur/default.pgo is the profile Go's compiler optimizes augur with
# (-pgo=auto): augur sim of ImageNet-1k on 1024 nodes for 30 epochs, every
# policy. The simulator ran 4-10% faster with it (1024 nodes x 30 epochs,
# results identical). Made again after the simulator changes.
.PHONY: pgo
pgo:
	$(GO) test -run X -bench 'ImageNet1024x30$$' -benchtime 1x -o $(BUILD)/sim.test \
		-cpuprofile cmd/augur/default.pgo ./sim/

# augur sim against what make bench measured (bench/results/bench.json,
# read as it is): simulated beside measured for every configuration and
# epoch, the largest deviation last. See docs/sim.md.
.PHONY: sim-validate
sim-validate:
	$(GO) run ./cmd/augur sim --validate bench/results/bench.json --png bench/results/sim-validate.png
