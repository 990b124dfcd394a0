/*
 * Minimal stand-in for QEMU's qemu/osdep.h, so that the NTB codec and the
 * NCM function build, are tested, fuzzed and benchmarked without a QEMU
 * tree.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef NCM_STANDALONE_OSDEP_H
#define NCM_STANDALONE_OSDEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib.h>

#ifndef MIN
#define MIN(a, b) (((a) < (b)) ? (a) : (b))
#endif
#ifndef MAX
#define MAX(a, b) (((a) > (b)) ? (a) : (b))
#endif
#define ROUND_UP(n, d) ((((n) + (d) - 1) / (d)) * (d))
#define ROUND_DOWN(n, d) (((n) / (d)) * (d))
#define ARRAY_SIZE(x) (sizeof(x) / sizeof((x)[0]))

#endif
