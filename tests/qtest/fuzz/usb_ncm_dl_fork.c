/*
 * usb-ncm-dl fuzz targets: one input per forked child
 *
 * QEMU's fuzz targets once ran each input in a child forked from a
 * process in which the machine was set up (tests/qtest/fuzz/fork_fuzz.c,
 * removed in QEMU 8.0, with a linker script that put the counters in
 * shared memory); the usb-ncm-dl targets do it again so that an input
 * neither pays for a machine reset and the device's enumeration nor
 * leaves anything behind.  The counters are copied instead of mapped:
 * no linker script.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "usb_ncm_dl_fork.h"

static int fork_mode = -1;          /* -1: not decided yet */
static NcmFuzzCounters *counters;
static uint8_t *counters_shm;
static size_t counters_len;

static void ncm_fuzz_counters_print(void)
{
    fprintf(stderr, "usb-ncm-dl fuzz: OP_MIGRATE reloaded %" PRIu64
            " streams (%" PRIu64 " bytes compared), skipped %" PRIu64
            " without a usable device, %" PRIu64 " right after another\n",
            counters->migrate_runs, counters->migrate_bytes,
            counters->migrate_skipped, counters->migrate_repeats);
    fprintf(stderr, "usb-ncm-dl fuzz: %" PRIu64 " of them with TDs in "
            "flight; %" PRIu64 " transfers in pieces (OP_MID_XFER), %" PRIu64
            " stops at a packet boundary (%" PRIu64 " migrations again at "
            "the same one skipped); %" PRIu64 " unmutated streams "
            "loaded and compared (migration-fuzz)\n",
            counters->migrate_in_flight, counters->mid_xfers,
            counters->mid_stops, counters->mid_repeats,
            counters->mig_unmodified);
    fprintf(stderr, "usb-ncm-dl fuzz: the NCM oracle checked %" PRIu64
            " bulk IN transfers and %" PRIu64 " descriptors\n",
            counters->oracle_in, counters->oracle_desc);
    fprintf(stderr, "usb-ncm-dl fuzz: %" PRIu64 " re-enumerations right "
            "after the same one skipped\n", counters->enumerate_repeats);
    fprintf(stderr, "usb-ncm-dl fuzz: %" PRIu64 " inputs ended with a "
            "controller reset (%" PRIu64 " of them with a fresh device), "
            "%" PRIu64 " with a machine reset\n", counters->light_resets,
            counters->device_replugs, counters->machine_resets);
}

NcmFuzzCounters *ncm_fuzz_counters(void)
{
    if (!counters) {
        counters = mmap(NULL, sizeof(*counters), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        g_assert(counters != MAP_FAILED);
        /* the children leave with _exit(): only this process prints */
        atexit(ncm_fuzz_counters_print);
    }
    return counters;
}

unsigned ncm_fuzz_reset_every(void)
{
    static int every = -1;

    if (every < 0) {
        const char *env = getenv("USB_NCM_FUZZ_RESET_EVERY");

        every = env ? MAX(atoi(env), 1) : 64;
    }
    return every;
}

bool ncm_fork_enabled(void)
{
    const char *env = getenv("USB_NCM_FUZZ_FORK");

    if (fork_mode >= 0) {
        return fork_mode;
    }
    fork_mode = env && strcmp(env, "0");
    if (fork_mode) {
        counters_len = __stop___sancov_cntrs - __start___sancov_cntrs;
        if (!__start___sancov_cntrs || !counters_len) {
            fprintf(stderr, "usb-ncm-dl fuzz: no coverage counters to hand "
                    "back from a child: inputs run in the process\n");
            fork_mode = 0;
            return false;
        }
        counters_shm = mmap(NULL, counters_len, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        g_assert(counters_shm != MAP_FAILED);
    }
    return fork_mode;
}

void ncm_fork_run(void (*fn)(void *opaque), void *opaque)
{
    pid_t pid;
    int status;

    g_assert(ncm_fork_enabled());
    fflush(NULL);
    pid = fork();
    g_assert(pid >= 0);
    if (!pid) {
        /*
         * A campaign stopped with SIGINT stops the parent, whose libFuzzer
         * prints its statistics; the child goes with it (PDEATHSIG), not
         * as a crash of its own.
         */
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        fn(opaque);
        memcpy(counters_shm, __start___sancov_cntrs, counters_len);
        _exit(0);
    }
    while (waitpid(pid, &status, 0) < 0) {
        g_assert(errno == EINTR);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status)) {
        /*
         * libFuzzer in the child reported the crash and saved the input
         * (its exit code, -error_exitcode): leave the same way, without a
         * second report of the same input.
         */
        fprintf(stderr, "usb-ncm-dl fuzz: the input's child exited with %d\n",
                WEXITSTATUS(status));
        _exit(WEXITSTATUS(status));
    }
    if (!WIFEXITED(status)) {
        /* killed without a report (SIGKILL): this process reports it */
        fprintf(stderr, "usb-ncm-dl fuzz: the input's child died of "
                "signal %d\n", WTERMSIG(status));
        abort();
    }
    memcpy(__start___sancov_cntrs, counters_shm, counters_len);
}
