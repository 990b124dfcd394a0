# SPDX-License-Identifier: GPL-2.0-or-later
#
# Thin front end: every verb is a script under scripts/ or tests/.
# The two that matter: `make run` (boot a guest on usb-ncm-dl) and
# `make check` (every test, ending with "N passed, N failed").

SHELL := /bin/bash
FUZZ_SECONDS ?= 60
SOAK_SECONDS ?= 600
PREFIX ?= /usr/local
# ARCH=arm64: make, run, shell and check-guest for an arm64 guest
# (qemu-system-aarch64 -M virt, built in build/qemu beside the x86 one;
# scripts/setup/qemu-tree.sh)
export QEMU_SRC QEMU_VERSION KERNEL FUZZ_SECONDS SANITIZE FUZZ_TARGET FUZZ_JOBS \
       ACCEL PREFIX DESTDIR ARCH KERNEL_SRC KERNEL_BUILTIN KERNEL_PACKAGE \
       GOOD BAD OLD NEW SCENARIO
# KERNEL_SRC=/path/to/linux: run, shell, repro-dropout, check-guest,
# guest-image and scenario on a kernel built from that tree first
# (scripts/kernel/build.sh: out of tree in build/kernel/, small config,
# ccache; KERNEL_BUILTIN=1: drivers built in). KERNEL_PACKAGE=<deb|spec>:
# a Debian kernel package. scripts/kernel/with-kernel.sh does both.
WITH_KERNEL := bash scripts/kernel/with-kernel.sh
ifneq ($(KERNEL_SRC),)
GUEST_IMAGE :=
else
GUEST_IMAGE := guest-image
endif

.PHONY: all qemu install deps guest-image run shell record replay replay-loop check check-quick check-migrate-each check-migrate-cross check-unit check-tools check-fuzz \
        check-qtest check-guest check-dropout soak fuzz bench-codec \
        fuzz-device fuzz-coverage bench-fuzz fuzz-oss fuzz-campaign check-fuzz-device bench bench-scaling profile perf-doc repro-dropout \
        series series-verify clean kernel deps-kernel scenario bisect bisect-packages \
        check-kernel check-kernel-loop vng check-vng tuxrun check-tuxrun

all: qemu

deps:
	@bash scripts/setup/install-deps.sh all

qemu:
	@bash scripts/setup/build-qemu.sh

# qemu-system-x86_64 with usb-ncm-dl and the firmware it needs at run time
# into $(DESTDIR)$(PREFIX) (scripts/setup/install-qemu.sh; docs/ci.md)
install:
	@bash scripts/setup/install-qemu.sh

guest-image:
	@$(WITH_KERNEL) bash tests/guest/image.sh

run: qemu $(GUEST_IMAGE)
	@$(WITH_KERNEL) bash tests/guest/run-guest.sh

shell: qemu $(GUEST_IMAGE)
	@$(WITH_KERNEL) bash tests/guest/run-guest.sh --shell

# The kernel developer's loop (scripts/kernel/, docs/kernel-developers.md):
# deps-kernel: what it needs (build tools, git, linux-source-6.1, the
# arm64 cross compiler); kernel: build KERNEL_SRC alone; scenario: one dropout scenario with a
# verdict (exit 0 no dropout, 1 dropout, 125 could not test); bisect: git
# bisect run of it over KERNEL_SRC between GOOD and BAD; bisect-packages:
# the same over Debian's linux-image packages, no building.
deps-kernel:
	@bash scripts/setup/install-deps.sh kernel

kernel:
	@bash scripts/kernel/build.sh

scenario: qemu
	@bash scripts/kernel/scenario.sh $(SCENARIO)

bisect: qemu
	@bash scripts/kernel/bisect.sh

bisect-packages: qemu
	@bash scripts/kernel/bisect-packages.sh

# vng: boot a kernel with the developer's own virtme-ng on the dock
# (scripts/kernel/vng-ncm.sh: KERNEL_PACKAGE or VNG_RUN names the kernel,
# default Debian's linux-image-amd64; one verdict line); check-vng: suite
# "vng" of make check (docs/kernel-developers.md, "virtme-ng").
# tuxrun/check-tuxrun: the same device in a tuxrun job
# (scripts/kernel/tuxrun-ncm.sh), a SKIP where tuxrun is not installed.
vng: qemu
	@bash scripts/kernel/vng-ncm.sh

check-vng:
	@bash scripts/check/check.sh vng

tuxrun: qemu
	@bash scripts/kernel/tuxrun-ncm.sh

check-tuxrun:
	@bash scripts/check/check.sh tuxrun

# check-kernel: the short kernel-loop checks (part of make check);
# check-kernel-loop: the long one (a linux-source-6.1 build, its boot, a
# planted regression bisected, 5.10 vs 6.1 packages; ~1 h under TCG)
check-kernel:
	@bash scripts/check/check.sh kernel

check-kernel-loop: qemu
	@bash tests/kernel/kernel-loop.sh

# make run under record/replay: record into build/replay/run.*, replay it
# (the same console output; REPLAY_GDB=1: stopped, with a gdbstub).
# REPLAY=record|replay also works on make run, make shell and
# tests/guest/dropout-run.sh.
record: qemu guest-image
	@REPLAY=record bash tests/guest/run-guest.sh

replay: qemu
	@REPLAY=replay bash tests/guest/run-guest.sh

# one record/replay scenario recorded and replayed REPLAY_LOOP times (10)
# in a row: SCENARIO=ehci|xhci|uhci|ohci|dropout (tests/guest/replay-loop.sh)
replay-loop: qemu guest-image
	@bash tests/guest/replay-loop.sh $(or $(SCENARIO),ehci) $(or $(REPLAY_LOOP),10)

check:
	@bash scripts/check/check.sh all

# the edit-compile-test loop: checkpatch and lints, the unit and tool
# tests, the device's command line and migration ABI, every qtest (no
# migrate-each share, no cross-version run); a few minutes once built
check-quick:
	@CHECK_QTEST_MIGRATE_SHARE=0 CHECK_QTEST_CROSS=0 bash scripts/check/check.sh style unit tools device qtest

check-unit:
	@bash scripts/check/check.sh unit

check-tools:
	@bash scripts/check/check.sh tools

check-fuzz:
	@bash scripts/check/check.sh fuzz

check-qtest:
	@bash scripts/check/check.sh qtest

# every case of the qtest fixture with the machine migrated at every step
# (NCM_QTEST_MIGRATE=each; make check runs a seeded share of them)
check-migrate-each:
	@CHECK_QTEST_PLAIN=0 CHECK_QTEST_MIGRATE_SHARE=100 bash scripts/check/check.sh qtest

# QEMU 10.0 <-> 10.2: builds build/10.2 (as QEMU_VERSION=10.2 make qemu
# does), then every migrate-each qtest case from each version to the other
# and a live migration of a guest under traffic from 10.0 to 10.2
check-migrate-cross: qemu
	@QEMU_VERSION=10.2 bash scripts/setup/build-qemu.sh
	@CHECK_QTEST_PLAIN=0 CHECK_QTEST_MIGRATE_SHARE=0 CHECK_QTEST_CROSS=all \
	  GUEST_CONTROLLERS= \
	  GUEST_ARM64= GUEST_TOPOLOGIES= GUEST_STRESS= GUEST_MIGRATE= GUEST_PM= \
	  GUEST_PROFILES= GUEST_JUMBO= GUEST_SOAK= GUEST_REPLAY= GUEST_PCAP= \
	  GUEST_INSTALL=0 GUEST_MIGRATE_CROSS=xhci \
	  $(WITH_KERNEL) bash scripts/check/check.sh qtest guest

check-guest:
	@$(WITH_KERNEL) bash scripts/check/check.sh guest

check-dropout:
	@bash scripts/check/check.sh dropout

fuzz:
	@bash scripts/check/fuzz.sh $(FUZZ_SECONDS)

# faults, NTB size changes, ifdown/up and live migrations under traffic for
# SOAK_SECONDS, QEMU's RSS watched (tests/guest/run-soak.sh; root)
soak: qemu guest-image
	@bash tests/guest/run-soak.sh $(SOAK_SECONDS)

# usb-ncm-dl inside QEMU's own libFuzzer binary (clang, ASan, UBSan), each
# fuzz target FUZZ_SECONDS; FUZZ_TARGET=name for one.  fuzz-coverage: the
# line coverage of the device's files that the fuzzers' corpora reach
# (FUZZ_COVERAGE=1 make fuzz-device: fuzz first, then that).
fuzz-device:
	@bash scripts/check/fuzz-device.sh $(FUZZ_SECONDS)

fuzz-coverage:
	@bash scripts/check/fuzz-device.sh --coverage 0

# every device fuzz target in turn for FUZZ_HOURS in all (FUZZ_JOBS=N: N
# side by side), resumable; the
# merged seeds into tests/fuzz/corpus/, a row per target into
# docs/findings.md
fuzz-campaign:
	@bash scripts/check/fuzz-campaign.sh $(or $(FUZZ_HOURS),1)

# the fuzz targets as OSS-Fuzz builds them (QEMU's scripts/oss-fuzz/build.sh)
fuzz-oss:
	@bash scripts/check/oss-fuzz-build.sh

# inputs/s of every structured fuzz target, forked and in the process
bench-fuzz:
	@bash scripts/check/fuzz-device.sh --bench $(or $(FUZZ_SECONDS),30)

check-fuzz-device:
	@bash scripts/check/check.sh fuzz-device

bench-codec:
	@bash scripts/bench/bench-codec.sh

# The upstream series (git format-patch) against the QEMU tree built with;
# series-verify also git-ams it onto a clean tree and builds every commit.
series: qemu
	@bash scripts/upstream/make-series.sh

series-verify: qemu
	@bash scripts/upstream/make-series.sh --verify

clean:
	rm -rf build

profile: qemu guest-image
	@bash scripts/bench/profile.sh

repro-dropout: qemu $(GUEST_IMAGE)
	@$(WITH_KERNEL) bash scripts/bench/repro-dropout.sh

bench: qemu guest-image
	@bash scripts/bench/bench.sh

bench-scaling: qemu guest-image
	@bash scripts/bench/bench-scaling.sh

# docs/performance.md's results blocks again from docs/performance/ (copy
# a run's results there first; scripts/bench/perf-doc.py)
perf-doc:
	@python3 scripts/bench/perf-doc.py
