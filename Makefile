# Synapse build. `make help` lists the targets.
#
# Layout: src/**.c -> libsynapse.{a,so}; tools/**.c -> the synapse tool (main.c dispatching to
# tools/cli/, tools/serve/ and tools/cluster/, on tools/common/);
# tests/unit/test_*.c -> one cmocka binary each. Kernel files named *_avx2.c, *_avx512.c,
# *_avxvnni.c (x86) or *_dotprod.c, *_i8mm.c (aarch64) get their ISA's flags and are built only
# for their architecture; everything else is portable C11 (no -march=native anywhere).

.DEFAULT_GOAL := help

CC      ?= gcc
BUILD   ?= build
OPT     ?= -O2
SAN     ?=
# What libsynapse itself links, and what the tool and the tests link besides.
LIB_PKGS := libpcre2-8 libutf8proc jansson
PKGS     := $(LIB_PKGS) libmicrohttpd
NPROC   := $(shell nproc 2>/dev/null || echo 2)
# Quiet when no compiler exists yet (a bare Debian before `make run` installs one).
TARGET_ARCH_NAME := $(shell $(CC) -dumpmachine 2>/dev/null | cut -d- -f1)

CPPFLAGS += -Iinclude -Isrc -D_GNU_SOURCE
CFLAGS   += -std=c11 $(OPT) -g -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-format-truncation -fPIC \
            -fvisibility=hidden $(SAN) \
            $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm
LIB_LDLIBS := $(shell pkg-config --libs $(LIB_PKGS) 2>/dev/null) -lpthread -lm
LDFLAGS  += $(SAN)

ALL_LIB_SRC := $(sort $(shell find src -name '*.c'))
X86_SRC     := $(filter %_avx2.c %_avx512.c %_avxvnni.c,$(ALL_LIB_SRC))
ARM_SRC     := $(filter %_dotprod.c %_i8mm.c %_neon.c,$(ALL_LIB_SRC))
ifeq ($(TARGET_ARCH_NAME),x86_64)
LIB_SRC := $(filter-out $(ARM_SRC),$(ALL_LIB_SRC))
else ifeq ($(TARGET_ARCH_NAME),aarch64)
LIB_SRC := $(filter-out $(X86_SRC),$(ALL_LIB_SRC))
else
LIB_SRC := $(filter-out $(X86_SRC) $(ARM_SRC),$(ALL_LIB_SRC))
endif
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TOOL_SRC := $(sort $(wildcard tools/*.c tools/*/*.c))
ifneq ($(TARGET_ARCH_NAME),x86_64)
TOOL_SRC := $(filter-out %_avx2.c %_avx512.c %_avxvnni.c,$(TOOL_SRC))
endif
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TEST_SUPPORT_SRC := $(sort $(wildcard tests/support/*.c))
TEST_SUPPORT_OBJ := $(TEST_SUPPORT_SRC:%.c=$(BUILD)/%.o)

# The shared library is versioned from include/synapse.h: soname libsynapse.so.MAJOR (the ABI
# version), file libsynapse.so.MAJOR.MINOR.PATCH, and the usual two symlinks to it.
version_part = $(shell sed -n 's/^\#define SYN_VERSION_$(1) \([0-9]*\)/\1/p' include/synapse.h)
VERSION := $(call version_part,MAJOR).$(call version_part,MINOR).$(call version_part,PATCH)
SONAME  := libsynapse.so.$(call version_part,MAJOR)

LIB_A  := $(BUILD)/libsynapse.a
LIB_SO := $(BUILD)/libsynapse.so
LIB_SO_REAL := $(BUILD)/libsynapse.so.$(VERSION)
TOOL   := $(BUILD)/synapse

# `make install`: the GNU directory variables, DESTDIR for staged installs.
PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR     ?= $(PREFIX)/bin
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig

# Per-ISA flags, by file-name suffix.
$(BUILD)/%_avx2.o:    ISA_FLAGS := -mavx2 -mfma -mf16c
$(BUILD)/%_avx512.o:  ISA_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx2 -mfma -mf16c
$(BUILD)/%_gfni_avx512.o: ISA_FLAGS := -mgfni -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx2 -mfma -mf16c
$(BUILD)/%_avxvnni.o: ISA_FLAGS := -mavxvnni -mavx2 -mfma -mf16c
$(BUILD)/%_dotprod.o: ISA_FLAGS := -march=armv8.2-a+dotprod
# KERNEL_SAN, where a build sets it, replaces SAN for the x86 kernel tier files, whose intrinsics
# made instrumenting them the longest part of make test's builds (quants_avx512.c: 2 min with
# ASan and UBSan, 1 min with ASan alone): the ASan build keeps ASan there, the fuzz build (no
# fuzzer runs a forward pass) only SAN's warning option.
ifdef KERNEL_SAN
$(BUILD)/%_avx2.o $(BUILD)/%_avx512.o $(BUILD)/%_avxvnni.o: override SAN := $(KERNEL_SAN)
endif
$(BUILD)/%_i8mm.o:    ISA_FLAGS := -march=armv8.6-a+dotprod+i8mm

# Keep the test objects that pattern rules build on the way to a binary (make would delete them
# and rebuild them on every run).
.SECONDARY:

.PHONY: help all lib tool tests test run debug format format-check deps check-deps clean fuzz install uninstall

help:
	@echo "Synapse make targets:"
	@echo "  make run      install missing Debian packages, build, generate the default model, run it"
	@echo "  make test     build and run every test (unit, CLI, ASan+UBSan, fuzz); ends with a summary"
	@echo "  make all      build libsynapse.a/.so, the synapse tool and the tests into $(BUILD)/"
	@echo "  make debug    the same with ASan + UBSan into build-debug/"
	@echo "  make fuzz     build the libFuzzer targets (GGUF reader, HTTP request parser, tokenizer, model output reader) into build-fuzz/"
	@echo "  make test-arm cross-build the aarch64 kernels and test them under qemu-user"
	@echo "  make bench-kernels  Q8_0 matvec/matmul speed per tier and thread count"
	@echo "  make bench-attention  the optimized backend's attention alone at depth 4096 (x86, AVX-512)"
	@echo "  make format   clang-format every C file"
	@echo "  make format-check  fail if any C file is not as clang-format lays it out (in make test)"
	@echo "  make deps     install missing Debian packages (scripts/install-deps.sh)"
	@echo "  make check-deps  check every compiler, library and tool the tests use is present"
	@echo "  make install  install the library, header, pkg-config file and tool (PREFIX=/usr/local DESTDIR=)"
	@echo "  make uninstall  remove what make install installed (same PREFIX and DESTDIR)"
	@echo "  make clean    remove build outputs"

all: lib tool tests

lib: $(LIB_A) $(LIB_SO)
tool: $(TOOL)
tests: $(TEST_BIN) $(BUILD)/make_bad_gguf

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ISA_FLAGS) -MMD -MP -c $< -o $@

$(LIB_A): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIB_SO_REAL): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) $(LDFLAGS) -o $@ $^ $(LIB_LDLIBS)

$(LIB_SO): $(LIB_SO_REAL)
	ln -sf $(notdir $(LIB_SO_REAL)) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

# The pkg-config file is written at install time, with the directories of that install; the
# external libraries are private (needed only when linking statically).
install: lib tool
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 644 $(LIB_A) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(LIB_SO_REAL) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(LIB_SO_REAL)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libsynapse.so
	install -m 644 include/synapse.h $(DESTDIR)$(INCLUDEDIR)/
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
	    'Name: synapse' 'Description: CPU inference engine for Qwen2-family GGUF language models' \
	    'Version: $(VERSION)' 'Requires.private: $(LIB_PKGS)' 'Cflags: -I$${includedir}' \
	    'Libs: -L$${libdir} -lsynapse' 'Libs.private: -lpthread -lm' >$(DESTDIR)$(PKGCONFIGDIR)/synapse.pc
	install -m 755 $(TOOL) $(DESTDIR)$(BINDIR)/

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libsynapse.a $(DESTDIR)$(LIBDIR)/libsynapse.so \
	    $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/$(notdir $(LIB_SO_REAL)) \
	    $(DESTDIR)$(INCLUDEDIR)/synapse.h $(DESTDIR)$(PKGCONFIGDIR)/synapse.pc $(DESTDIR)$(BINDIR)/synapse

# The chat page is assembled into the binary (.incbin), which -MMD does not see.
$(BUILD)/tools/serve/endpoints.o: tools/serve/chat.html

# The tools see include/synapse.h and, of src/, only src/synapse_internal.h (tests/cli/test_boundary.sh).
$(TOOL_OBJ): CPPFLAGS += -Itools

$(TOOL): $(TOOL_OBJ) $(LIB_A)
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(LIB_A) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(TEST_SUPPORT_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(TEST_SUPPORT_OBJ) $(LIB_A) $(LDLIBS) -lcmocka

# Writes the corrupted-GGUF corpus for the CLI tests (tests/support/bad_gguf.c holds the cases).
$(BUILD)/make_bad_gguf: $(BUILD)/tests/tools/make_bad_gguf.o $(BUILD)/tests/support/bad_gguf.o $(LIB_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

deps:
	scripts/install-deps.sh

check-deps:
	scripts/check-deps.sh

run: deps
	scripts/check-deps.sh --build
	$(MAKE) -j$(NPROC) all
	scripts/run-default.sh

# The ASan + UBSan build (the x86 kernel tier files with ASan alone: KERNEL_SAN above). -O2 rather
# than -O1: its tests run about 1.5x faster, which keeps make test within CI's budget, and the
# reports stay as exact (frame pointers kept).
ASAN_BUILD = BUILD=build-debug OPT=-O2 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
             KERNEL_SAN="-fsanitize=address -fno-omit-frame-pointer -fno-sanitize-recover=all"

test: deps
	scripts/check-deps.sh
	$(MAKE) -j$(NPROC) all
	$(MAKE) -j$(NPROC) $(ASAN_BUILD) lib tests
	tests/run-all.sh

debug:
	$(MAKE) $(ASAN_BUILD) all

fuzz:
	$(MAKE) -j$(NPROC) BUILD=build-fuzz CC=clang OPT=-O1 KERNEL_SAN=-Wno-unknown-warning-option \
	    SAN="-fsanitize=address,undefined,fuzzer-no-link -Wno-unknown-warning-option" lib
	@mkdir -p build-fuzz
	clang -std=c11 -O1 -g -Iinclude -Isrc -fsanitize=address,undefined,fuzzer tests/fuzz/fuzz_gguf.c \
	    build-fuzz/libsynapse.a $(LDLIBS) -o build-fuzz/fuzz_gguf
	clang -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -Isrc -fsanitize=address,undefined,fuzzer \
	    -Itools tests/fuzz/fuzz_openai_request.c tools/serve/openai_request.c \
	    tools/serve/anthropic_request.c \
	    build-fuzz/libsynapse.a $(LDLIBS) -o build-fuzz/fuzz_openai_request
	clang -std=c11 -O1 -g -Iinclude -Isrc $(shell pkg-config --cflags libutf8proc 2>/dev/null) \
	    -fsanitize=address,undefined,fuzzer tests/fuzz/fuzz_tokenizer.c \
	    build-fuzz/libsynapse.a $(LDLIBS) -o build-fuzz/fuzz_tokenizer
	clang -std=c11 -O1 -g -Iinclude -Isrc -fsanitize=address,undefined,fuzzer tests/fuzz/fuzz_chat_output.c \
	    build-fuzz/libsynapse.a $(LDLIBS) -o build-fuzz/fuzz_chat_output
	clang -std=c11 -O1 -g -Iinclude -Isrc -fsanitize=address,undefined,fuzzer tests/fuzz/fuzz_template.c \
	    build-fuzz/libsynapse.a $(LDLIBS) -o build-fuzz/fuzz_template

FORMAT_FILES = $(shell find include src tools tests -name '*.[ch]' -o -name '*.cpp' | grep -v node_modules | sort)

format:
	clang-format -i $(FORMAT_FILES)

# Every C file exactly as clang-format 14 lays it out with .clang-format (run by make test).
format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

clean:
	rm -rf build build-debug build-fuzz build-arm

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(TEST_SUPPORT_OBJ:.o=.d) $(BUILD)/tests/tools/make_bad_gguf.d \
    $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%.d)

# ---- BEGIN kernel targets: ARM tests, kernel benchmark (issue 3: kernels) ------------------------
# `make test-arm` cross-builds the aarch64 kernels (src/kernels without the x86 files, plus
# src/core/error.c) and tests/arm/test_kernels_arm.c as one static binary, then runs it under
# qemu-user twice: -cpu max (neon-dot and i8mm tested against scalar) and -cpu cortex-a53 (no dot
# product: only scalar may be detected, and asking for neon-dot must fail).
ARM_CC    ?= aarch64-linux-gnu-gcc
ARM_QEMU  ?= qemu-aarch64
ARM_BUILD ?= build-arm
ARM_SRC_ALL := $(filter-out %_avx2.c %_avx512.c %_avxvnni.c,$(sort $(wildcard src/kernels/*.c))) \
               src/core/error.c src/gguf/ggml_types.c tests/arm/test_kernels_arm.c \
               tests/support/type_kernels_check.c
ARM_OBJ   := $(ARM_SRC_ALL:%.c=$(ARM_BUILD)/%.o)
ARM_TEST  := $(ARM_BUILD)/test_kernels_arm
ARM_CFLAGS := -std=c11 -O2 -g -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-format-truncation \
              -Iinclude -Isrc -D_GNU_SOURCE

$(ARM_BUILD)/%_dotprod.o: ARM_ISA_FLAGS := -march=armv8.2-a+dotprod
$(ARM_BUILD)/%_i8mm.o:    ARM_ISA_FLAGS := -march=armv8.6-a+dotprod+i8mm

$(ARM_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(ARM_CC) $(ARM_CFLAGS) $(ARM_ISA_FLAGS) -MMD -MP -c $< -o $@

$(ARM_TEST): $(ARM_OBJ)
	$(ARM_CC) -static -o $@ $^ -lm

.PHONY: test-arm
test-arm: $(ARM_TEST)
	$(ARM_QEMU) -cpu max $(ARM_TEST) max
	$(ARM_QEMU) -cpu cortex-a53 $(ARM_TEST) nodot

-include $(ARM_OBJ:.o=.d)

# `make bench-kernels`: Q8_0 matvec/matmul GB/s per tier and thread count (tests/bench).
.PHONY: bench-kernels
bench-kernels: $(LIB_A)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $(BUILD)/bench_kernels tests/bench/bench_kernels.c $(LIB_A) $(LDLIBS)
	$(BUILD)/bench_kernels
# ---- END kernel targets --------------------------------------------------------------------------

# `make bench-attention`: the optimized backend's attention alone (tests/bench/bench_attention.c),
# built from src/kernels/floats_impl.h with the AVX-512 build's flags;
# ARGS="depth threads f16 steps".
.PHONY: bench-attention
bench-attention:
	@mkdir -p $(BUILD)
	$(CC) $(CPPFLAGS) $(CFLAGS) -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mf16c -o $(BUILD)/bench_attention \
	    tests/bench/bench_attention.c -lpthread -lm
	$(BUILD)/bench_attention $(ARGS)
