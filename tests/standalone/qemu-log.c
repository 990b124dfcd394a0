/*
 * Stand-in for QEMU's logging, for the standalone unit tests.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/log.h"

unsigned ncm_standalone_guest_errors;

void qemu_log_mask(int mask, const char *fmt, ...)
{
    va_list ap;

    if (mask & LOG_GUEST_ERROR) {
        ncm_standalone_guest_errors++;
    }
    if (g_getenv("NCM_TEST_LOG")) {
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
}
