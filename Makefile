# layoutbench: one Makefile. Knobs (override on the command line):
#   CC, CFLAGS, BUILD (object folder), V=1 (loud), SAN=1 (AddressSanitizer + UBSan),
#   WITH_SLURM=auto|1|0 (libslurm executor), WITH_CURL=auto|1|0 (slurmrestd executor),
#   WITH_CUDA=auto|1|0 (the trainer's CUDA backend: built whenever nvcc is found),
#   CUDA_HOME (default /usr/local/cuda), CUDA_ARCH=90a (sm_90a, H100/H200; 80 for A100).
CC ?= cc
BUILD ?= build
CFLAGS ?= -O2 -g
CUDA_HOME ?= /usr/local/cuda
CUDA_ARCH ?= 90a
NVCC ?= $(CUDA_HOME)/bin/nvcc
NVCCFLAGS ?= -O3 -lineinfo
WITH_CUDA ?= auto
WITH_SLURM ?= auto
WITH_CURL ?= auto
V ?= 0

ifeq ($(V),1)
Q :=
else
Q := @
endif

ifeq ($(WITH_SLURM),auto)
WITH_SLURM := $(shell test -f /usr/include/slurm/slurm.h && echo 1 || echo 0)
endif
ifeq ($(WITH_CURL),auto)
WITH_CURL := $(shell pkg-config --exists libcurl 2>/dev/null && echo 1 || echo 0)
endif
ifeq ($(WITH_CUDA),auto)
# the sanitizer build leaves CUDA out (its runtime and ASan's shadow memory do not mix)
WITH_CUDA := $(if $(filter 1,$(SAN)),0,$(shell test -x $(NVCC) && echo 1 || echo 0))
endif

# cuDNN's headers, for the `cudnn` attention kernel (see below)
CUDNN_INC := $(if $(filter 1,$(WITH_CUDA)),$(firstword $(foreach d,$(CUDA_HOME)/include \
	/usr/include/x86_64-linux-gnu /usr/include,$(if $(wildcard $(d)/cudnn_graph.h),$(d)))))

GIT_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

# The configuration this build detected, recorded in a file every object depends on: when
# it changes (a package installed since the last build, a knob set on the command line),
# what it touches is rebuilt rather than left stale.
CONFIG_STAMP := $(BUILD)/gen/config.txt
CONFIG_TEXT := WITH_SLURM=$(WITH_SLURM) WITH_CURL=$(WITH_CURL) WITH_CUDA=$(WITH_CUDA) \
	CUDA_ARCH=$(CUDA_ARCH) SAN=$(SAN) CFLAGS=$(CFLAGS) CUDNN_INC=$(CUDNN_INC)
$(shell mkdir -p $(BUILD)/gen && { [ "$$(cat $(CONFIG_STAMP) 2>/dev/null)" = '$(CONFIG_TEXT)' ] || \
	printf '%s\n' '$(CONFIG_TEXT)' >$(CONFIG_STAMP); })

# The commit, likewise in a file rewritten only when it changes, which common/version.c
# includes: the run logs' git_commit is the commit the binary was built from, not the one
# its version object happened to be compiled at.
GIT_COMMIT_H := $(BUILD)/gen/git_commit.h
GIT_COMMIT_TEXT := \#define LB_GIT_COMMIT "$(GIT_COMMIT)"
$(shell { [ "$$(cat $(GIT_COMMIT_H) 2>/dev/null)" = '$(GIT_COMMIT_TEXT)' ] || \
	printf '%s\n' '$(GIT_COMMIT_TEXT)' >$(GIT_COMMIT_H); })

WARN := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wstrict-prototypes
CPPFLAGS += -I. -I$(BUILD)/gen -D_GNU_SOURCE
ifeq ($(SAN),1)
CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
ALL_CFLAGS = -std=c11 $(WARN) $(CFLAGS)

CLI_LIBS := -lcjson -lsqlite3 -lm -lpthread
ifeq ($(WITH_SLURM),1)
CPPFLAGS += -DLB_WITH_SLURM=1
# -ldl: dlsym (slurm/exec_slurm.c), in libc itself only since glibc 2.34
CLI_LIBS += -lslurm -ldl
endif
ifeq ($(WITH_CURL),1)
CPPFLAGS += -DLB_WITH_CURL=1
CLI_LIBS += -lcurl
endif
TRAIN_LIBS := -lm -lpthread -lrt -ldl
ifeq ($(WITH_CUDA),1)
# the trainer needs only CUDA's libraries on a GPU node: the runtime linked statically,
# cuBLASLt found through the rpath (or LD_LIBRARY_PATH, as `module load cuda` sets it)
CPPFLAGS += -DLB_WITH_CUDA=1
TRAIN_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcudart_static \
	-ldl $(TRAIN_LIBS)
endif

# cuDNN's headers, for the `cudnn` attention kernel (the library itself is loaded at run time,
# so the trainer does not depend on it); without them that kernel says so when chosen.
CUDNN_CPPFLAGS := $(if $(CUDNN_INC),-DLB_WITH_CUDNN=1 $(if $(filter /usr/include,$(CUDNN_INC)),,-I$(CUDNN_INC)))
ifeq ($(WITH_CUDA),1)
$(BUILD)/obj/harness/cuda/attention_cudnn.o $(BUILD)/obj/bench/cudnn_sweep.o: CPPFLAGS += $(CUDNN_CPPFLAGS)
endif

# Sources: every .c of a stage's folder belongs to that stage's library.
COMMON_SRC  := $(wildcard common/*.c)
CLI_SRC     := $(wildcard sweeps/*.c results/*.c report/*.c slurm/*.c) \
               $(filter-out cli/main.c,$(wildcard cli/*.c))
HARNESS_SRC := $(filter-out harness/train_main.c,$(wildcard harness/*.c harness/comm/*.c))
CUDA_SRC    := $(if $(filter 1,$(WITH_CUDA)),$(wildcard harness/cuda/*.cu harness/comm/*.cu))
# the benchmarks' CUDA code (bench/*.cu): linked into the benchmarks and the tests, never
# into the trainer
BENCH_CU_SRC := $(if $(filter 1,$(WITH_CUDA)),$(wildcard bench/*.cu))

# Files embedded into the CLI (one source of truth, generated copies).
EMBED_FILES := $(wildcard results/*.sql) $(wildcard sweeps/specs/*.json) $(wildcard report/*.gp) \
               $(wildcard common/machines/*.json)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
COMMON_OBJ  := $(call obj,$(COMMON_SRC))
CLI_OBJ     := $(call obj,$(CLI_SRC)) $(BUILD)/obj/gen/embed.o
HARNESS_OBJ := $(call obj,$(HARNESS_SRC)) $(patsubst %.cu,$(BUILD)/obj/%.o,$(CUDA_SRC))
BENCH_OBJ   := $(patsubst %.cu,$(BUILD)/obj/%.o,$(BENCH_CU_SRC))

NVCC_CMD = $(NVCC) $(CPPFLAGS) -std=c++17 $(NVCCFLAGS) \
	-Xcompiler -Wall,-Wextra,-Wno-unused-parameter,-fno-threadsafe-statics -MMD -MP

LB      := $(BUILD)/layoutbench
TRAIN   := $(BUILD)/layoutbench-train
LIBCOMMON  := $(BUILD)/libcommon.a
LIBCLI     := $(BUILD)/libcli.a
LIBHARNESS := $(BUILD)/libharness.a
LIBBENCH   := $(BUILD)/libbench.a

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

.PHONY: all test test-run test-gpu asan bench bench-gpu fuzz deps quickstart clean format test-slurm cuda-arch paper-data
all: $(LB) $(TRAIN)

# The schema version, the last step of results/schema.sql (results/db.h includes it); an
# order-only prerequisite of every compile, whose dependency files then track it.
SCHEMA_VERSION_H := $(BUILD)/gen/schema_version.h
$(SCHEMA_VERSION_H): results/schema.sql scripts/schema-version.sh
	@mkdir -p $(@D)
	$(Q)sh scripts/schema-version.sh results/schema.sql >$@.tmp && \
		{ cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@; }

$(BUILD)/obj/common/version.o: $(GIT_COMMIT_H)

$(BUILD)/obj/%.o: %.c $(CONFIG_STAMP) | $(SCHEMA_VERSION_H)
	@mkdir -p $(@D)
	@$(if $(filter 0,$(V)),echo "  CC      $<")
	$(Q)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj/%.o: %.cu $(CONFIG_STAMP) | $(SCHEMA_VERSION_H)
	@mkdir -p $(@D)
	@$(if $(filter 0,$(V)),echo "  NVCC    $<")
	$(Q)$(NVCC_CMD) -arch=sm_$(CUDA_ARCH) -c -o $@ $<

# make cuda-arch: the CUDA code compiled (to a cubin, ptxas included) for the other
# architecture the trainer is built for, CUDA_ALT_ARCH (default 80: A100), so that code for
# Hopper alone outside its guard fails here rather than on an A100 cluster's first build
# (tests/sh/cuda_arch.sh runs it in a build folder of its own).
CUDA_ALT_ARCH ?= 80
ALT_CUBIN := $(patsubst %.cu,$(BUILD)/cubin/sm_$(CUDA_ALT_ARCH)/%.cubin,$(CUDA_SRC) $(BENCH_CU_SRC))
$(BUILD)/cubin/sm_$(CUDA_ALT_ARCH)/harness/cuda/attention_cudnn.cubin \
$(BUILD)/cubin/sm_$(CUDA_ALT_ARCH)/bench/cudnn_sweep.cubin: CPPFLAGS += $(CUDNN_CPPFLAGS)
$(BUILD)/cubin/sm_$(CUDA_ALT_ARCH)/%.cubin: %.cu $(CONFIG_STAMP)
	@mkdir -p $(@D)
	@$(if $(filter 0,$(V)),echo "  NVCC    $< (sm_$(CUDA_ALT_ARCH))")
	$(Q)$(NVCC_CMD) -arch=sm_$(CUDA_ALT_ARCH) -cubin -o $@ $<
cuda-arch: $(ALT_CUBIN)

$(BUILD)/gen/embed.c: $(EMBED_FILES) scripts/embed.sh
	@mkdir -p $(@D)
	$(Q)sh scripts/embed.sh $(EMBED_FILES) > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/gen/embed.o: $(BUILD)/gen/embed.c
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

$(LIBCOMMON): $(COMMON_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^
$(LIBCLI): $(CLI_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^
$(LIBHARNESS): $(HARNESS_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^
$(LIBBENCH): $(BENCH_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^

$(LB): $(BUILD)/obj/cli/main.o $(LIBCLI) $(LIBCOMMON)
	@$(if $(filter 0,$(V)),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ $(CLI_LIBS)

$(TRAIN): $(BUILD)/obj/harness/train_main.o $(LIBHARNESS) $(LIBCOMMON)
	@$(if $(filter 0,$(V)),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ $(TRAIN_LIBS)

# Unit tests (cmocka): each tests/unit/test_*.c is one binary linked with every library.
$(BUILD)/tests/%: tests/unit/%.c $(LIBCLI) $(LIBBENCH) $(LIBHARNESS) $(LIBCOMMON) $(SCHEMA_VERSION_H)
	@mkdir -p $(@D)
	@$(if $(filter 0,$(V)),echo "  TEST    $@")
	$(Q)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< \
		-Wl,--start-group $(LIBCLI) $(LIBBENCH) $(LIBHARNESS) $(LIBCOMMON) -Wl,--end-group \
		-lcmocka $(CLI_LIBS) $(TRAIN_LIBS)

$(BUILD)/bench/%: bench/%.c $(LIBCLI) $(LIBBENCH) $(LIBHARNESS) $(LIBCOMMON) $(SCHEMA_VERSION_H)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< \
		-Wl,--start-group $(LIBCLI) $(LIBBENCH) $(LIBHARNESS) $(LIBCOMMON) -Wl,--end-group \
		$(CLI_LIBS) $(TRAIN_LIBS)

# make test: install what is missing, then (in a fresh make, so that what the build
# detects is what is installed now) every unit binary, the golden and end-to-end scripts,
# a short fuzz run; ends with one summary line "N passed, N failed, N skipped".
test: deps
	$(Q)$(MAKE) --no-print-directory test-run
test-run: all $(UNIT_BIN) $(BUILD)/bench/bench_plan $(BUILD)/bench/bench_colls \
		$(BUILD)/bench/bench_kernels
	$(Q)BUILD=$(BUILD) sh tests/run.sh

# make test-gpu: the GPU tests alone, on a machine with a GPU (a skip is a failure here).
test-gpu: all $(UNIT_BIN)
	$(Q)BUILD=$(BUILD) TESTS=gpu LB_REQUIRE_GPU=1 sh tests/run.sh

# make asan: the same tests under AddressSanitizer and UBSan, in their own build folder.
asan:
	$(Q)$(MAKE) --no-print-directory BUILD=build-asan SAN=1 CFLAGS="-O1 -g" test

bench: all $(BENCH_BIN)
	$(Q)BUILD=$(BUILD) sh bench/run.sh

# make bench-gpu: the kernel table and the end-to-end MFU table on this machine's GPU.
bench-gpu: all $(BENCH_BIN)
	$(Q)BUILD=$(BUILD) sh bench/gpu/round.sh

# Fuzz targets (libFuzzer, clang). FUZZ_TIME seconds per target.
FUZZ_TIME ?= 60
fuzz:
	$(Q)BUILD=$(BUILD) FUZZ_TIME=$(FUZZ_TIME) sh tests/fuzz/run.sh

deps:
	$(Q)sh scripts/deps.sh

# make paper-data: the paper's measured runs as CSV (scripts/paper-data.sh), fetched from
# the authors' repository, or PAPER_FROM=DIR (a local copy of it); into PAPER_OUT.
PAPER_OUT ?= paper-data
paper-data:
	$(Q)sh scripts/paper-data.sh $(if $(PAPER_FROM),--from '$(PAPER_FROM)') --out '$(PAPER_OUT)'

deps-check:
	$(Q)sh scripts/deps.sh --check

quickstart: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(LB) quickstart

test-slurm:
	$(Q)sh scripts/slurm-local.sh start && BUILD=$(BUILD) LB_SLURM_TESTS=1 sh tests/run.sh; \
		rc=$$?; sh scripts/slurm-local.sh stop; exit $$rc

format:
	$(Q)clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(BUILD)/obj $(BUILD)/cubin -name '*.d' 2>/dev/null)
