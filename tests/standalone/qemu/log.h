/*
 * Stand-in for QEMU's qemu/log.h: guest errors are counted, so that unit
 * tests can check that malformed input is reported.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef NCM_STANDALONE_LOG_H
#define NCM_STANDALONE_LOG_H

#define LOG_GUEST_ERROR         (1 << 11)

/* qemu_log_mask() calls with LOG_GUEST_ERROR so far */
extern unsigned ncm_standalone_guest_errors;

void qemu_log_mask(int mask, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

#endif
