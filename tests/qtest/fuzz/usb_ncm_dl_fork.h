/*
 * usb-ncm-dl fuzz targets: one input per forked child
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef USB_NCM_DL_FORK_H
#define USB_NCM_DL_FORK_H

/*
 * -fsanitize=fuzzer puts one 8-bit counter per edge in this section (the
 * inline-8bit-counters of SanitizerCoverage); the linker defines its
 * bounds.  Weak: a binary without the section has no counters to copy.
 */
extern uint8_t __start___sancov_cntrs[] __attribute__((weak));
extern uint8_t __stop___sancov_cntrs[] __attribute__((weak));

/*
 * Whether inputs run in forked children: with USB_NCM_FUZZ_FORK=1 (not
 * the default: forking this process costs more per input than resetting
 * the machine; see make bench-fuzz), unless the binary has no counters to
 * hand back.
 */
bool ncm_fork_enabled(void);

/*
 * Run @fn(@opaque) in a child forked from this process and wait for it.
 * The child copies libFuzzer's counters into shared memory before it
 * exits; they are copied back here, so that libFuzzer sees the child's
 * coverage.  A child that crashed (ASan, an assertion, an oracle) had
 * libFuzzer in the child report it and save the input; this process
 * then exits with the child's exit code (a child killed without a report:
 * this process aborts, and its libFuzzer saves the input).
 */
void ncm_fork_run(void (*fn)(void *opaque), void *opaque);

/*
 * Counters the inputs keep across the fuzz run, in memory shared with
 * the children (so that a forked input's count is not lost with it),
 * printed at exit.
 */
typedef struct NcmFuzzCounters {
    uint64_t migrate_runs;      /* OP_MIGRATE: streams saved and reloaded */
    uint64_t migrate_skipped;   /* OP_MIGRATE with no usable device */
    uint64_t migrate_bytes;     /* bytes compared after the reload */
    uint64_t migrate_in_flight; /* ... of them with TDs in flight */
    uint64_t migrate_repeats;   /* OP_MIGRATE right after one: skipped */
    uint64_t enumerate_repeats; /* re-enumerations right after one */
    uint64_t mid_xfers;         /* OP_MID_XFER: transfers in pieces */
    uint64_t mid_stops;         /* ... stops at a packet boundary */
    uint64_t mid_repeats;       /* ... migrations again at one: skipped */
    uint64_t mig_unmodified;    /* migration-fuzz: unmutated, loaded */
    uint64_t oracle_in;         /* bulk IN transfers the oracle checked */
    uint64_t oracle_desc;       /* GET_DESCRIPTOR replies it checked */
    uint64_t light_resets;      /* inputs followed by a controller reset */
    uint64_t machine_resets;    /* ... by a machine reset */
    uint64_t device_replugs;    /* ... by a fresh device (no machine reset) */
} NcmFuzzCounters;

NcmFuzzCounters *ncm_fuzz_counters(void);

/*
 * Inputs between two machine resets: USB_NCM_FUZZ_RESET_EVERY, 64 unless
 * set (at least 1).  In between, an input starts from a controller reset.
 */
unsigned ncm_fuzz_reset_every(void);

#endif /* USB_NCM_DL_FORK_H */
