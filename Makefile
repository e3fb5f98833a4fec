# csifs build. Objects and binaries under $(BUILD) (default build/, ASan build/asan/).
#
#   make            build everything (run `make deps` first on a fresh machine)
#   make run        install deps, build, mount csifs on $(MNT) with state in $(STATE)
#   make test       install deps, build, run every test
#   make test-asan  the same tests built with ASan + UBSan
#   make bench      benchmarks
#   make clean
#
# Layout: every .c in registry/ csi/ fs/ (but fs/main.c) and every generated
# proto/*.pb-c.c goes into one static library; binaries and tests link it.

BUILD   ?= build
# make V=1 shows the full commands
V       ?=
Q        = $(if $(V),,@)
SAN     ?=
CC      ?= cc
MNT     ?= /run/csi
STATE   ?= /var/lib/csifs
PKGS    := fuse3 grpc libprotobuf-c lmdb

# Lazily expanded so that a machine without the -dev packages can still run `make deps`.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS))
CRIT_LIBS  = $(shell pkg-config --libs criterion)

OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
WARN     := -Wall -Wextra -Werror
ifeq ($(SAN),1)
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
# make fuzz: clang with libFuzzer coverage, ASan and UBSan
ifeq ($(SAN),fuzz)
SANFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
ALL_CFLAGS  = -std=c11 -D_GNU_SOURCE -DFUSE_USE_VERSION=314 $(WARN) $(CFLAGS) $(SANFLAGS) \
              -I. -I$(BUILD)/gen $(PKG_CFLAGS) -MMD -MP
ALL_LDFLAGS = $(SANFLAGS) $(LDFLAGS)
LIBS        = $(PKG_LIBS) -lpthread

PROTOS      := $(wildcard proto/*.proto)
PROTO_C     := $(PROTOS:%.proto=$(BUILD)/gen/%.pb-c.c)
PROTO_H     := $(PROTOS:%.proto=$(BUILD)/gen/%.pb-c.h)
LIB_SRCS    := $(filter-out fs/main.c,$(wildcard registry/*.c csi/*.c fs/*.c))
LIB_OBJS    := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(PROTO_C:$(BUILD)/gen/%.c=$(BUILD)/obj/gen/%.o)
LIB         := $(BUILD)/libcsifs.a

TESTLIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/lib/*.c))
UNIT_TESTS   := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/*.c))
INTEG_TESTS  := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,$(wildcard tests/integration/*.c))
TOOLS        := $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(wildcard tests/tools/*.c))
PLUGIN_SRCS  := $(wildcard tests/plugin/*.c)
BENCH_SRCS   := $(wildcard tests/bench/*.c)
CRASH_SRCS   := $(wildcard tests/crash/*.c)
ROUNDS       ?= 50
STRESS_SRCS  := $(wildcard tests/stress/*.c)
STRESS_SECONDS ?= 60
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/*.c))
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang-14

BINS := $(if $(wildcard fs/main.c),$(BUILD)/csifs) \
        $(if $(PLUGIN_SRCS),$(BUILD)/csi-test-plugin) \
        $(if $(BENCH_SRCS),$(BUILD)/csifs-bench) $(TOOLS)

# Unit tests that also run under valgrind (registry and store only: gRPC under
# valgrind is too slow for CI).
VALGRIND_TESTS ?= $(filter $(addprefix $(BUILD)/tests/unit/,registry events store store_crash store_refuse),$(UNIT_TESTS))

.PHONY: all deps run test test-asan check bench crash-test fuzz fuzz-bins stress clean
# Keep generated sources and objects (no intermediate deletion and rebuild).
.SECONDARY:
all: $(BINS) $(UNIT_TESTS) $(INTEG_TESTS)

deps:
	@sh scripts/deps.sh

run: deps
	@$(MAKE) --no-print-directory all
	@sh scripts/run.sh "$(BUILD)/csifs" "$(MNT)" "$(STATE)"

test: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory check

test-asan: deps
	@$(MAKE) --no-print-directory BUILD=build/asan SAN=1 OPT=-O1 all
	@CSIFS_TEST_SLACK=3 $(MAKE) --no-print-directory BUILD=build/asan SAN=1 OPT=-O1 VALGRIND_TESTS= check

check: all
	@BUILD="$(BUILD)" VALGRIND_TESTS="$(VALGRIND_TESTS)" \
	  sh scripts/run-tests.sh $(UNIT_TESTS) $(INTEG_TESTS)

bench: deps
	@$(MAKE) --no-print-directory all
	@sh scripts/bench.sh "$(BUILD)"

# SIGKILL csifs under 1, 4 and 8 writers, restart, check (tests/crash/main.c).
crash-test: deps
	@$(MAKE) --no-print-directory $(BUILD)/csifs $(BUILD)/csi-test-plugin $(BUILD)/csifs-crash-test
	@BUILD="$(BUILD)" $(BUILD)/csifs-crash-test $(ROUNDS)

# libFuzzer targets (tests/fuzz), FUZZ_SECONDS each; a crash saves its
# reproducer under build/fuzz/artifacts/<target>/ and fails.
fuzz: deps
	@$(MAKE) --no-print-directory BUILD=build/fuzz CC=$(FUZZ_CC) SAN=fuzz OPT=-O1 fuzz-bins
	@sh tests/fuzz/run.sh build/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-bins: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/%)

# 8 random writers + an events reader against the ASan build (tests/stress).
stress: deps
	@$(MAKE) --no-print-directory BUILD=build/asan SAN=1 OPT=-O1 build/asan/csifs \
	  build/asan/csi-test-plugin build/asan/csifs-stress
	@BUILD=build/asan CSIFS_TEST_SLACK=3 build/asan/csifs-stress $(STRESS_SECONDS)

clean:
	rm -rf build

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: %.proto
	@mkdir -p $(BUILD)/gen
	@echo "  PROTOC  $<"
	$(Q)protoc-c --c_out=$(BUILD)/gen $<

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -Wno-unused-parameter -c -o $@ $<

$(BUILD)/obj/%.o: %.c | $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/csifs: $(BUILD)/obj/fs/main.o $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/csi-test-plugin: $(PLUGIN_SRCS:%.c=$(BUILD)/obj/%.o) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/csifs-bench: $(BENCH_SRCS:%.c=$(BUILD)/obj/%.o) $(TESTLIB_OBJS) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/csifs-crash-test: $(CRASH_SRCS:%.c=$(BUILD)/obj/%.o) $(TESTLIB_OBJS) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/csifs-stress: $(STRESS_SRCS:%.c=$(BUILD)/obj/%.o) $(TESTLIB_OBJS) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/fuzz/%: $(BUILD)/obj/tests/fuzz/%.o $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LIBS)

$(BUILD)/tools/%: $(BUILD)/obj/tests/tools/%.o $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(TESTLIB_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS) $(CRIT_LIBS)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
