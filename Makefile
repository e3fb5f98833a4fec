# csifs build. Objects and binaries under $(BUILD) (default build/, ASan build/asan/).
#
#   make            build csifs and the test plugin (the hook is a script); run
#                   `make deps` first on a fresh machine
#   make run        install deps, build, mount csifs on $(MNT) with state in $(STATE)
#   make demo       a 20 s tour on a temporary mount (scripts/demo.sh)
#   make test       install deps, build the test binaries, run every test
#   make test-asan  the same tests built with ASan + UBSan
#   (JOBS=N: the build of test, test-asan, crash-test, fuzz, stress and build-clang runs
#   N jobs at once)
#   make bench      benchmarks
#   make crash-test ROUNDS=N      SIGKILL csifs under writers, restart, check (default 50)
#   make crash-test TAKEOVER=1    the same under the test fd store: each successor takes
#                                 the mount over, no user may notice (UPGRADE=1: SIGUSR2)
#   make fuzz FUZZ_SECONDS=N      libFuzzer targets, N s each (clang-14; default 60)
#   make stress STRESS_SECONDS=N  random concurrent operations against the ASan build
#   make build-clang  the programs, tests, bench and stress built with clang-14 too
#                   (build/clang)
#   make install    csifs, csi-plugin-hook, man pages, csifs.service under
#                   $(DESTDIR)$(PREFIX) (PREFIX default /usr/local)
#   make uninstall  remove exactly what `make install` installed
#   make clean
#
# Layout: every .c in base/ registry/ csi/ fs/ cmd/ http/ kubelet/ (but cmd/main.c) and every
# generated proto/*.pb-c.c goes into one static library; binaries and tests
# link it.

BUILD   ?= build
# make V=1 shows the full commands
V       ?=
Q        = $(if $(V),,@)
SAN     ?=
CC      ?= cc
MNT     ?= /run/csi
STATE   ?= /var/lib/csifs
PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR   = $(PREFIX)/bin
MAN8DIR  = $(PREFIX)/share/man/man8
UNITDIR  = $(PREFIX)/lib/systemd/system
MANS    := docs/csifs.8 docs/csi-plugin-hook.8
PKGS    := fuse3 grpc libprotobuf-c lmdb mount libsystemd libmicrohttpd zlib

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
# Test-only options (-o debug_commit_delay_ms=, -o debug_fail_commit=): in
# the build the tests use; an installed csifs is built with TEST_OPTS=0.
TEST_OPTS ?= 1
ALL_CFLAGS  = $(if $(filter 1,$(TEST_OPTS)),-DCSIFS_TEST_OPTS) -std=c11 -D_GNU_SOURCE -DFUSE_USE_VERSION=314 $(WARN) $(CFLAGS) $(SANFLAGS) \
              -I. -I$(BUILD)/gen $(PKG_CFLAGS) -MMD -MP
ALL_LDFLAGS = $(SANFLAGS) $(LDFLAGS)
LIBS        = $(PKG_LIBS) -lpthread

PROTOS      := $(wildcard proto/*.proto)
PROTO_C     := $(PROTOS:%.proto=$(BUILD)/gen/%.pb-c.c)
PROTO_H     := $(PROTOS:%.proto=$(BUILD)/gen/%.pb-c.h)
LIB_SRCS    := $(filter-out cmd/main.c,$(wildcard base/*.c registry/*.c csi/*.c fs/*.c cmd/*.c cluster/*.c http/*.c kubelet/*.c takeover/*.c))
LIB_OBJS    := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(PROTO_C:$(BUILD)/gen/%.c=$(BUILD)/obj/gen/%.o)
LIB         := $(BUILD)/libcsifs.a

TESTLIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/lib/*.c))
UNIT_TESTS   := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/*.c))
INTEG_TESTS  := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,$(wildcard tests/integration/*.c))
# tests/system/X.c: suites that start etcd, floods or crash loops. Built like
# the integration suites; `make test` runs them, `make test-asan` does not
# (they run once per CI run).
SYSTEM_TESTS := $(if $(filter 1,$(SAN)),,$(patsubst tests/system/%.c,$(BUILD)/tests/system/%,$(wildcard tests/system/*.c)))
TOOLS        := $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(wildcard tests/tools/*.c))
PLUGIN_SRCS  := $(wildcard tests/plugin/*.c)
BENCH_SRCS   := $(filter-out tests/bench/floorfs.c,$(wildcard tests/bench/*.c))
CRASH_SRCS   := $(wildcard tests/crash/*.c)
ROUNDS       ?= 50
STRESS_SRCS  := $(wildcard tests/stress/*.c)
STRESS_SECONDS ?= 60
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/*.c))
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang-14

# `make` builds these; the hook (scripts/csi-plugin-hook) is a script.
PROGS := $(if $(wildcard cmd/main.c),$(BUILD)/csifs) \
         $(if $(PLUGIN_SRCS),$(BUILD)/csi-test-plugin)
BENCH := $(if $(BENCH_SRCS),$(BUILD)/csifs-bench $(BUILD)/floorfs)
# What `make test` needs beyond PROGS.
# (tests/system/upgrade runs the crash test's UPGRADE=1 mode.)
CHECK_BINS := $(UNIT_TESTS) $(INTEG_TESTS) $(SYSTEM_TESTS) $(TOOLS) $(BUILD)/floorfs \
              $(if $(SYSTEM_TESTS),$(BUILD)/csifs-crash-test)

# Unit tests that also run under valgrind (registry, store and base/later only:
# gRPC under valgrind is too slow for CI).
# The unit and integration suites run in this many lanes at once (they
# mostly wait on deadlines and on each other's processes); the system
# suites one at a time after them. TEST_LANES=1: all one after another.
TEST_LANES ?= 2
# make test JOBS=N (test-asan, crash-test, fuzz, stress, build-clang too): their builds
# run N jobs at once (a recursive make of a serial one runs one at a time).
JOBS ?=
J = $(if $(JOBS),-j$(JOBS))

# The lanes take the next binary no lane has taken (scripts/run-tests.sh):
# the longest first, so that the lanes end together: install (it builds a
# release csifs, some 2 minutes), the valgrind ones (run twice), then the
# integration suites that wait on many heartbeats; the rest in name order.
LONG_TESTS  := integration/install unit/store_refuse unit/store_crash unit/registry unit/store \
               unit/keep unit/events unit/events_ring integration/prober_death integration/prober \
               integration/commit integration/current_health
LANE_TESTS   = $(foreach t,$(LONG_TESTS),$(filter $(BUILD)/tests/$(t),$(UNIT_TESTS) $(INTEG_TESTS))) \
               $(filter-out $(addprefix $(BUILD)/tests/,$(LONG_TESTS)),$(UNIT_TESTS) $(INTEG_TESTS))

VALGRIND_TESTS ?= $(filter $(addprefix $(BUILD)/tests/unit/,registry keep events events_ring store store_crash store_refuse later),$(UNIT_TESTS))

.PHONY: all tests deps run demo test test-asan check bench crash-test fuzz fuzz-bins stress build-clang install uninstall clean
# Keep generated sources and objects (no intermediate deletion and rebuild).
.SECONDARY:
all: $(PROGS)

# Every binary the tests run: the programs, the Criterion binaries, the tools.
tests: $(PROGS) $(CHECK_BINS)

deps:
	@sh scripts/deps.sh

run: deps
	@$(MAKE) --no-print-directory all
	@sh scripts/run.sh "$(BUILD)/csifs" "$(MNT)" "$(STATE)"

demo: deps
	@$(MAKE) --no-print-directory all
	@sh scripts/demo.sh "$(BUILD)"

test: deps
	@$(MAKE) --no-print-directory $(J) tests
	@$(MAKE) --no-print-directory check

test-asan: deps
	@$(MAKE) --no-print-directory $(J) BUILD=build/asan SAN=1 OPT=-O1 tests
	@CSIFS_TEST_SLACK=3 $(MAKE) --no-print-directory BUILD=build/asan SAN=1 OPT=-O1 VALGRIND_TESTS= check

check: tests
	@sh scripts/check-cycles.sh --self-test
	@sh scripts/check-cycles.sh || { echo "check: FAILED: a cycle in the file-level call graph (scripts/check-cycles.sh, above)" >&2; exit 1; }
	@! grep -ln '^#include "cmd/' base/* registry/* csi/* fs/* kubelet/* || { echo "check: FAILED: the files above include cmd/ (the command): only cmd/ and tests may" >&2; exit 1; }
	@BUILD="$(BUILD)" VALGRIND_TESTS="$(VALGRIND_TESTS)" \
	  sh scripts/run-tests.sh --lanes $(TEST_LANES) $(LANE_TESTS) --serial $(SYSTEM_TESTS)

bench: deps
	@$(MAKE) --no-print-directory all $(BENCH)
	@sh scripts/bench.sh "$(BUILD)"

# SIGKILL csifs under 1, 4 and 8 writers, restart, check (tests/crash/main.c).
crash-test: deps
	@$(MAKE) --no-print-directory $(J) $(BUILD)/csifs $(BUILD)/csi-test-plugin $(BUILD)/csifs-crash-test
	@BUILD="$(BUILD)" TAKEOVER="$(TAKEOVER)" UPGRADE="$(UPGRADE)" $(BUILD)/csifs-crash-test $(ROUNDS)

# libFuzzer targets (tests/fuzz), FUZZ_SECONDS each; a crash saves its
# reproducer under build/fuzz/artifacts/<target>/ and fails.
fuzz: deps
	@$(MAKE) --no-print-directory $(J) BUILD=build/fuzz CC=$(FUZZ_CC) SAN=fuzz OPT=-O1 fuzz-bins
	@sh tests/fuzz/run.sh build/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-bins: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/%)

# 8 random writers + an events reader against the ASan build (tests/stress).
stress: deps
	@$(MAKE) --no-print-directory $(J) BUILD=build/asan SAN=1 OPT=-O1 build/asan/csifs \
	  build/asan/csi-test-plugin build/asan/csifs-stress
	@BUILD=build/asan CSIFS_TEST_SLACK=3 build/asan/csifs-stress $(STRESS_SECONDS)

# Both compilers build warning-free (-Werror): gcc above, clang here.
CLANG_BUILD := build/clang
build-clang: deps
	@$(MAKE) --no-print-directory $(J) BUILD=$(CLANG_BUILD) CC=$(FUZZ_CC) tests \
	  $(addprefix $(CLANG_BUILD)/,csifs-bench floorfs csifs-stress)

# The unit's ExecStart names the installed csifs: scripts/csifs.service says
# /usr/local/bin, rewritten to $(BINDIR) here.
# The installed csifs is built apart, without the test-only options.
install:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/release TEST_OPTS=0 $(BUILD)/release/csifs
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MAN8DIR) $(DESTDIR)$(UNITDIR)
	install -m 0755 $(BUILD)/release/csifs $(DESTDIR)$(BINDIR)/csifs
	install -m 0755 scripts/csi-plugin-hook $(DESTDIR)$(BINDIR)/csi-plugin-hook
	install -m 0644 $(MANS) $(DESTDIR)$(MAN8DIR)/
	sed 's|^ExecStart=/usr/local/bin/|ExecStart=$(BINDIR)/|' scripts/csifs.service \
	  >$(DESTDIR)$(UNITDIR)/csifs.service.tmp
	chmod 0644 $(DESTDIR)$(UNITDIR)/csifs.service.tmp
	mv -f $(DESTDIR)$(UNITDIR)/csifs.service.tmp $(DESTDIR)$(UNITDIR)/csifs.service

# The files, then the directories install made that are now empty (rmdir
# refuses one that holds other programs' files): below $(PREFIX), but not
# hier(7)'s own bin, lib, share and share/man on the live system; under a
# DESTDIR (a staging tree install made) up to the DESTDIR, not itself.
HIER_DIRS = $(if $(DESTDIR),,$(PREFIX)/bin $(PREFIX)/lib $(PREFIX)/share $(PREFIX)/share/man)
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/csifs $(DESTDIR)$(BINDIR)/csi-plugin-hook \
	  $(addprefix $(DESTDIR)$(MAN8DIR)/,$(notdir $(MANS))) $(DESTDIR)$(UNITDIR)/csifs.service
	@for d in $(BINDIR) $(MAN8DIR) $(UNITDIR); do \
	  while [ -n "$$d" ] && [ "$$d" != "$(if $(DESTDIR),,$(PREFIX))" ]; do \
	    case " $(HIER_DIRS) " in *" $$d "*) break;; esac; \
	    rmdir "$(DESTDIR)$$d" 2>/dev/null || break; \
	    d=$${d%/*}; \
	  done; \
	done

clean:
	rm -rf $(BUILD)

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

$(BUILD)/csifs: $(BUILD)/obj/cmd/main.o $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/csi-test-plugin: $(PLUGIN_SRCS:%.c=$(BUILD)/obj/%.o) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/csifs-bench: $(BENCH_SRCS:%.c=$(BUILD)/obj/%.o) $(TESTLIB_OBJS) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

# The floor of the tree rows (tests/bench/floorfs.c): csifs's receive loop
# (fs/serve.c), nothing else of csifs.
$(BUILD)/floorfs: $(BUILD)/obj/tests/bench/floorfs.o $(BUILD)/obj/tests/bench/walk.o $(LIB)
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
