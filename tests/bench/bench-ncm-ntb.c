/*
 * Throughput of the USB CDC-NCM NTB16 codec next to plain memcpy
 *
 * Workloads: one NTB16 of up to 64 KiB (wNdpDivisor 4, remainder 0,
 * NDP alignment 4, up to NCM_MAX_DATAGRAMS datagrams) filled with
 * 1514-byte or with 64-byte datagrams.
 *
 *   parse: ncm_transfer_parse() over the whole NTB; its emit callback
 *          memcpy()s every datagram into a 2 KiB frame buffer and sums the
 *          first and last byte, which is what a device model does with a
 *          frame before handing it on.
 *   build: ncm_ntb_builder_init(), ncm_ntb_builder_append() of every
 *          datagram, ncm_ntb_builder_finish().
 *   memcpy: one memcpy() of the same number of payload bytes between two
 *          64 KiB buffers, measured in the same run, as the ceiling.
 *
 * MB/s counts datagram payload bytes (10^6 per MB).  Each figure repeats
 * its operation for at least 0.3 s of CLOCK_MONOTONIC time.  Numbers
 * only: there is no pass/fail threshold.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <time.h>
#include "hw/usb/ncm-ntb.h"

#define NTB_MAX         NCM_NTB16_MAX_SIZE
#define MIN_SECONDS     0.3

static const NcmNtbLayout layout = {
    .max_len = NTB_MAX,
    .divisor = 4,
    .remainder = 0,
    .ndp_alignment = 4,
    .max_datagrams = NCM_MAX_DATAGRAMS,
};

static const NcmParseLimits limits = {
    .max_ntb_len = NTB_MAX,
    .max_datagram_len = 1514,
    .max_datagrams = NCM_MAX_DATAGRAMS,
};

static uint8_t src[NTB_MAX];            /* datagrams back to back */
static uint8_t ntb[NTB_MAX];            /* the built NTB that is parsed */
static uint8_t scratch_ntb[NTB_MAX];    /* what the build benchmark writes */
static uint8_t dst[NTB_MAX];            /* memcpy destination */
static uint8_t frame[2048];
static NcmNtbBuilder builder;
static NcmNtbView view;
/* results land here so that the compiler cannot drop the work */
static volatile unsigned sink;

static struct {
    uint32_t dg_len;
    unsigned n;                 /* datagrams in the NTB */
    uint32_t ntb_len;
    size_t payload;             /* n * dg_len */
} w;

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Keep the compiler from dropping or merging copies nobody reads. */
static inline void clobber(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

static void emit_copy(void *opaque, const uint8_t *data, size_t len)
{
    unsigned *acc = opaque;

    memcpy(frame, data, len);
    clobber(frame);
    *acc += frame[0] + frame[len - 1];
}

static void do_parse(void)
{
    unsigned acc = 0, ntbs;

    if (ncm_transfer_parse(&ncm_ntb16_format, ntb, w.ntb_len, &limits,
                           &view, emit_copy, &acc, &ntbs) != NCM_PARSE_OK ||
        ntbs != 1) {
        fprintf(stderr, "bench-ncm-ntb: parse failed\n");
        exit(1);
    }
    sink += acc;
}

static void do_build(void)
{
    unsigned i;

    ncm_ntb_builder_init(&builder, &ncm_ntb16_format, &layout, scratch_ntb);
    for (i = 0; i < w.n; i++) {
        if (!ncm_ntb_builder_append(&builder, src + (size_t)i * w.dg_len,
                                    w.dg_len)) {
            fprintf(stderr, "bench-ncm-ntb: append failed\n");
            exit(1);
        }
    }
    sink += ncm_ntb_builder_finish(&builder, 0);
    clobber(scratch_ntb);
}

static void do_memcpy(void)
{
    memcpy(dst, src, w.payload);
    clobber(dst);
    sink += dst[w.payload - 1];
}

/* MB/s of payload for @fn, doubling the batch until 0.3 s are covered. */
static double measure(void (*fn)(void))
{
    uint64_t iters = 0, batch = 1, i;
    double t0, elapsed;

    for (i = 0; i < 16; i++) {
        fn();
    }
    t0 = now();
    do {
        for (i = 0; i < batch; i++) {
            fn();
        }
        iters += batch;
        elapsed = now() - t0;
        if (elapsed < MIN_SECONDS / 10) {
            batch *= 2;
        }
    } while (elapsed < MIN_SECONDS);
    return (double)iters * w.payload / elapsed / 1e6;
}

static void setup(uint32_t dg_len)
{
    size_t i;

    w.dg_len = dg_len;
    for (i = 0; i < sizeof(src); i++) {
        src[i] = i * 7 + (i >> 9);
    }
    ncm_ntb_builder_init(&builder, &ncm_ntb16_format, &layout, ntb);
    w.n = 0;
    while ((size_t)(w.n + 1) * dg_len <= sizeof(src) &&
           ncm_ntb_builder_append(&builder, src + (size_t)w.n * dg_len,
                                  dg_len)) {
        w.n++;
    }
    w.ntb_len = ncm_ntb_builder_finish(&builder, 0);
    w.payload = (size_t)w.n * dg_len;
}

static void report(const char *what, double mbs, double memcpy_mbs)
{
    printf("%s %uB: %.1f MB/s  memcpy: %.1f MB/s  ratio %.2f"
           "  (%u datagrams in %u bytes, %.2f M datagrams/s)\n",
           what, w.dg_len, mbs, memcpy_mbs, mbs / memcpy_mbs, w.n,
           w.ntb_len, mbs / w.dg_len);
}

int main(void)
{
    static const uint32_t sizes[] = { 1514, 64 };
    size_t i;

    printf("bench-ncm-ntb: NTB16 <= %u bytes, divisor %u, NDP alignment %u;"
           " MB = 10^6 payload bytes; >= %.1f s per figure\n",
           NTB_MAX, layout.divisor, layout.ndp_alignment, MIN_SECONDS);
    for (i = 0; i < ARRAY_SIZE(sizes); i++) {
        double parse, build, copy;

        setup(sizes[i]);
        copy = measure(do_memcpy);
        parse = measure(do_parse);
        report("parse", parse, copy);
        copy = measure(do_memcpy);
        build = measure(do_build);
        report("build", build, copy);
    }
    return 0;
}
