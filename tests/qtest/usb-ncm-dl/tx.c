/*
 * usb-ncm-dl qtest: host to device (OUT NTBs, malformed NTBs, the
 * ZLP merge rule, counters)
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"

/* Cases: host to device */

static void test_tx_datagrams(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    const unsigned *count = c->data;     /* 0: wNtbOutMaxDatagrams */
    unsigned n = *count ? *count : e->p.out_max_datagrams;
    unsigned i;

    ncm_set_alt(e, 1);
    for (i = 0; i < n; i++) {
        size_t len = n == 40 ? 1514 - (i % 3) : 60 + (i * 131) % 900;

        ncm_frames_add(tx, i % 3 ? ncm_bcast_mac : ncm_other_mac, 1000 + i,
                       len);
    }
    ncm_send_frames(e, tx);
    ncm_sock_expect_frames(e, tx);
    ncm_sock_expect_silence(e, 20);
    ncm_check_marker(e, 1100);
}

static void test_tx_64k(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GByteArray) ntb = NULL;

    ncm_set_alt(e, 1);
    ntb = ncm_ntb_build_filled(e, 65536, 1514, 1200, tx);
    g_assert_cmpuint(lduw_le_p(ntb->data + 8), ==, 0);
    g_assert_cmpuint(ntb->len % e->mps, ==, 0);
    ncm_out_td(e, ntb->data, ntb->len);
    if (!strcmp(c->model, "usb-ncm-dl")) {
        /* ZLP-required firmware: nothing until the transfer ends */
        ncm_sock_expect_silence(e, 50);
        ncm_out_td(e, NULL, 0);
        ncm_sock_expect_frames(e, tx);
    } else {
        /* NCM 1.0: dwNtbOutMaxSize bytes end the transfer by themselves */
        ncm_sock_expect_frames(e, tx);
        ncm_out_td(e, NULL, 0);
    }
    ncm_sock_expect_silence(e, 20);
    ncm_check_marker(e, 1300);
}

static void test_tx_split(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    uint32_t len = 4 * e->mps + 300;

    ncm_set_alt(e, 1);
    ntb = ncm_ntb_build_filled(e, len, 700, 1400, tx);
    g_assert_cmpuint(tx->len, >=, 2);
    ncm_out_td(e, ntb->data, 2 * e->mps);
    ncm_out_td(e, ntb->data + 2 * e->mps, 2 * e->mps);
    ncm_sock_expect_silence(e, 20);
    ncm_out_td(e, ntb->data + 4 * e->mps, 300);
    ncm_sock_expect_frames(e, tx);
    ncm_sock_expect_silence(e, 20);
    ncm_check_marker(e, 1500);
}

static void test_tx_exact_multiple(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    bool dl = !strcmp(c->model, "usb-ncm-dl");

    ncm_set_alt(e, 1);
    ntb = ncm_ntb_build_filled(e, 3 * e->mps, 500, 1600, tx);
    ncm_out_td(e, ntb->data, e->mps);
    ncm_out_td(e, ntb->data + e->mps, 2 * e->mps);
    if (dl) {
        ncm_sock_expect_silence(e, 50);
    } else {
        /* wBlockLength has arrived: NCM 1.0 needs no terminator */
        ncm_sock_expect_frames(e, tx);
    }
    ncm_out_td(e, NULL, 0);
    if (dl) {
        ncm_sock_expect_frames(e, tx);
    }
    ncm_sock_expect_silence(e, 20);
    ncm_check_marker(e, 1700);
}

/* CVE-2024-27405: a trailing 1-byte zero pad must not cost the NTB */
static void test_tx_windows_pad(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    NcmHostLayout l;
    uint8_t zero = 0;
    unsigned i;

    ncm_set_alt(e, 1);
    for (i = 0; i < 4; i++) {
        ncm_frames_add(tx, ncm_bcast_mac, 1800 + i, 100 + i * 200);
    }
    l = ncm_out_layout(e);
    ntb = ncm_ntb_build(&l, tx, 0);
    g_byte_array_append(ntb, &zero, 1);
    ncm_send(e, ntb->data, ntb->len);
    ncm_sock_expect_frames(e, tx);
    ncm_sock_expect_silence(e, 20);
    ncm_check_marker(e, 1900);
}

/* Malformed OUT NTBs, one per NcmParseError class */

enum {
    BAD_NTH_TRUNCATED,
    BAD_NTH_SIGNATURE,
    BAD_NTH_HEADER_LEN,
    BAD_BLOCK_TOO_SHORT,
    BAD_BLOCK_PAST_TRANSFER,
    BAD_BLOCK_TOO_LONG,
    BAD_NDP_ALIGNMENT,
    BAD_NDP_BOUNDS,
    BAD_NDP_PAST_BLOCK,
    BAD_NDP_SIGNATURE,
    BAD_NDP_LENGTH,
    BAD_NDP_AT_END,
    BAD_NDP_UNTERMINATED,
    BAD_NDP_CHAIN_LOOP,
    BAD_NDP_CHAIN_TOO_LONG,
    BAD_DATAGRAM_BOUNDS,
    BAD_DATAGRAM_WRAP,
    BAD_DATAGRAM_PAST_BLOCK,
    BAD_DATAGRAM_TOO_SHORT,
    BAD_DATAGRAM_TOO_LONG,
    BAD_TOO_MANY_DATAGRAMS,
    BAD_NTB32_BLOCK_LEN_0,
    BAD__MAX,
};

/* Each with the out_parse_errors class it must count in */
typedef struct BadNtbCase {
    const char *name;
    const char *error;
    const char *props;
} BadNtbCase;

static const BadNtbCase bad_cases[BAD__MAX] = {
    [BAD_NTH_TRUNCATED] = { "nth-truncated", "nth-truncated" },
    [BAD_NTH_SIGNATURE] = { "nth-signature", "nth-signature" },
    [BAD_NTH_HEADER_LEN] = { "nth-header-length", "nth-header-length" },
    [BAD_BLOCK_TOO_SHORT] = { "block-too-short", "block-too-short" },
    [BAD_BLOCK_PAST_TRANSFER] = { "block-past-transfer",
                                  "block-past-transfer" },
    [BAD_BLOCK_TOO_LONG] = { "block-too-long", "block-too-long",
                             "ntb-out-max-size=16384" },
    [BAD_NDP_ALIGNMENT] = { "ndp-alignment", "ndp-alignment" },
    [BAD_NDP_BOUNDS] = { "ndp-bounds", "ndp-bounds" },
    [BAD_NDP_PAST_BLOCK] = { "ndp-past-block", "ndp-bounds" },
    [BAD_NDP_SIGNATURE] = { "ndp-signature", "ndp-signature" },
    [BAD_NDP_LENGTH] = { "ndp-length", "ndp-length" },
    /* the header fits, its wLength does not */
    [BAD_NDP_AT_END] = { "ndp-at-end", "ndp-length" },
    [BAD_NDP_UNTERMINATED] = { "ndp-unterminated", "ndp-unterminated" },
    [BAD_NDP_CHAIN_LOOP] = { "ndp-chain-loop", "ndp-chain-loop" },
    [BAD_NDP_CHAIN_TOO_LONG] = { "ndp-chain-too-long",
                                 "ndp-chain-too-long" },
    [BAD_DATAGRAM_BOUNDS] = { "datagram-bounds", "datagram-bounds" },
    [BAD_DATAGRAM_WRAP] = { "datagram-length-wraps", "datagram-bounds" },
    [BAD_DATAGRAM_PAST_BLOCK] = { "datagram-past-block", "datagram-bounds" },
    [BAD_DATAGRAM_TOO_SHORT] = { "datagram-too-short", "datagram-too-short" },
    [BAD_DATAGRAM_TOO_LONG] = { "datagram-too-long", "datagram-too-long" },
    [BAD_TOO_MANY_DATAGRAMS] = { "too-many-datagrams",
                                 "too-many-datagrams" },
    /* NTB32 has no "length from the transfer": 0 is just too short */
    [BAD_NTB32_BLOCK_LEN_0] = { "ntb32-block-length-0", "block-too-short" },
};

/* 17 NDPs, each pointing to the next, the first with a valid datagram */
static GByteArray *ntb_ndp_chain(unsigned ndps)
{
    g_autoptr(GByteArray) f = ncm_make_frame(ncm_bcast_mac, 3000, 100);
    GByteArray *ntb = g_byte_array_new();
    uint32_t dg = 12 + ndps * 16;
    unsigned i;

    g_byte_array_set_size(ntb, dg + f->len);
    memset(ntb->data, 0, ntb->len);
    memcpy(ntb->data + dg, f->data, f->len);
    memcpy(ntb->data, "NCMH", 4);
    stw_le_p(ntb->data + 4, 12);
    stw_le_p(ntb->data + 8, ntb->len);
    stw_le_p(ntb->data + 10, 12);
    for (i = 0; i < ndps; i++) {
        uint8_t *ndp = ntb->data + 12 + i * 16;

        memcpy(ndp, "NCM0", 4);
        stw_le_p(ndp + 4, 16);
        stw_le_p(ndp + 6, i + 1 < ndps ? 12 + (i + 1) * 16 : 0);
        if (i == 0) {
            stw_le_p(ndp + 8, dg);
            stw_le_p(ndp + 10, f->len);
        }
    }
    return ntb;
}

static GByteArray *ntb_malformed(NcmEnv *e, int which)
{
    g_autoptr(GPtrArray) frames = ncm_frames_new();
    NcmHostLayout l = ncm_out_layout(e);
    GByteArray *ntb;
    uint8_t *b;
    unsigned i;

    if (which == BAD_NDP_CHAIN_TOO_LONG) {
        return ntb_ndp_chain(17);
    }
    if (which == BAD_TOO_MANY_DATAGRAMS) {
        for (i = 0; i <= e->p.out_max_datagrams; i++) {
            ncm_frames_add(frames, ncm_bcast_mac, 3100 + i, 60);
        }
        return ncm_ntb_build(&l, frames, 0);
    }
    ncm_frames_add(frames, ncm_bcast_mac, 3200, 100);
    ncm_frames_add(frames, ncm_bcast_mac, 3201,
                   which == BAD_DATAGRAM_TOO_LONG ? 1515 : 100);
    ntb = ncm_ntb_build(&l, frames, 0);
    b = ntb->data;
    if (which == BAD_NTB32_BLOCK_LEN_0) {
        /* CVE-2024-35825: NTB32 has no "length from the transfer" */
        g_assert(l.ntb32);
        stl_le_p(b + 8, 0);
        return ntb;
    }
    /* NTH at 0, NDP at 12 (20 bytes), datagrams at 32 and 132 */
    g_assert(!l.ntb32);
    g_assert_cmpuint(lduw_le_p(b + 10), ==, 12);
    g_assert_cmpuint(lduw_le_p(b + 12 + 8), ==, 32);
    g_assert_cmpuint(lduw_le_p(b + 12 + 12), ==, 132);

    switch (which) {
    case BAD_NTH_TRUNCATED:
        g_byte_array_set_size(ntb, 10);
        break;
    case BAD_NTH_SIGNATURE:
        b[3] = 'X';
        break;
    case BAD_NTH_HEADER_LEN:
        stw_le_p(b + 4, 16);
        break;
    case BAD_BLOCK_TOO_SHORT:
        /* CVE-2026-31617: shorter than NTH + NDP */
        stw_le_p(b + 8, 20);
        break;
    case BAD_BLOCK_PAST_TRANSFER:
        stw_le_p(b + 8, ntb->len + 100);
        break;
    case BAD_BLOCK_TOO_LONG:
        g_assert_cmpuint(e->p.out_max, ==, 16384);
        ncm_ntb_pad_to(ntb, false, 20000);
        break;
    case BAD_NDP_ALIGNMENT:
        stw_le_p(b + 10, 14);
        break;
    case BAD_NDP_BOUNDS:
        stw_le_p(b + 10, 4);            /* inside the NTH */
        break;
    case BAD_NDP_PAST_BLOCK:
        stw_le_p(b + 10, ntb->len - 4);
        break;
    case BAD_NDP_SIGNATURE:
        b[12 + 3] = '1';                /* NCM1: CRC, never enabled */
        break;
    case BAD_NDP_LENGTH:
        stw_le_p(b + 12 + 4, 0x11);
        break;
    case BAD_NDP_AT_END:
        /* CVE-2026-23448: header fits, entries run past the block */
        memcpy(b + ntb->len - 8, b + 12, 8);
        stw_le_p(b + 10, ntb->len - 8);
        break;
    case BAD_NDP_UNTERMINATED:
        stw_le_p(b + 12 + 4, 16);       /* two entries, no null one */
        break;
    case BAD_NDP_CHAIN_LOOP:
        stw_le_p(b + 12 + 6, 12);
        break;
    case BAD_DATAGRAM_BOUNDS:
        /* CVE-2022-48938: index near 0xfff0 */
        stw_le_p(b + 12 + 12, 0xfff0);
        stw_le_p(b + 12 + 14, 0x20);
        break;
    case BAD_DATAGRAM_WRAP:
        stw_le_p(b + 12 + 14, 0xfff0);  /* index + length wraps 16 bits */
        break;
    case BAD_DATAGRAM_PAST_BLOCK:
        /* a plausible length that still ends outside the block */
        stw_le_p(b + 12 + 14, 1000);
        break;
    case BAD_DATAGRAM_TOO_SHORT:
        stw_le_p(b + 12 + 14, 10);
        break;
    case BAD_DATAGRAM_TOO_LONG:
        break;
    default:
        g_assert_not_reached();
    }
    return ntb;
}

static void test_malformed(NcmEnv *e, const NcmCase *c)
{
    const BadNtbCase *bad = c->data;
    int which = bad - bad_cases;
    g_autoptr(GByteArray) ntb = NULL;

    if (which == BAD_NTB32_BLOCK_LEN_0) {
        g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_FORMAT, 1, NULL, 0),
                        ==, QXHCI_CC_SUCCESS);
    }
    ncm_set_alt(e, 1);
    e->ntb32 = which == BAD_NTB32_BLOCK_LEN_0;
    ntb = ntb_malformed(e, which);
    ncm_mark(e);
    ncm_send(e, ntb->data, ntb->len);
    /* not a single datagram of a malformed NTB leaves the device */
    ncm_sock_expect_silence(e, 20);
    /* counted once, in its own class */
    ncm_assert_parse_errors(e, bad->error, 1);
    ncm_assert_deltas(e, { "out_ntbs", 0 }, { "out_datagrams", 0 },
                      { "out_bytes", 0 }, { "out_merged_transfers", 0 });
    ncm_assert_alive(e);
    ncm_check_marker(e, 3300);
    /* twice in a row, and back to back with a valid one */
    ncm_send(e, ntb->data, ntb->len);
    ncm_check_marker(e, 3400);
    ncm_assert_alive(e);
    ncm_assert_parse_errors(e, bad->error, 2);
    ncm_assert_deltas(e, { "out_ntbs", 2 }, { "out_datagrams", 6 });
}

/* Cases: the zlp=required merge rule (issue 6) */

typedef struct MergeCase {
    bool zlp;                   /* a ZLP between the two transfers */
    bool block_len_0;           /* first NTB: wBlockLength 0, 64 KiB */
} MergeCase;

/*
 * An NTB of an exact multiple of wMaxPacketSize in one transfer, then a
 * short NTB in another.  Without a ZLP between them, ZLP-required
 * firmware sees one transfer and uses only its first NTB; NCM 1.0
 * delimits them by wBlockLength (or dwNtbOutMaxSize) and loses nothing.
 */
static void test_merge(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) first = ncm_frames_new();
    g_autoptr(GPtrArray) second = ncm_frames_new();
    g_autoptr(GPtrArray) want = ncm_frames_new();
    g_autoptr(GByteArray) a = NULL;
    g_autoptr(GByteArray) b = NULL;
    bool required = !strcmp(c->model, "usb-ncm-dl");
    const MergeCase *mc = c->data;
    bool zlp = mc->zlp, big = mc->block_len_0;
    bool merged = required && !zlp;
    uint32_t len = big ? e->p.out_max : (c->super ? 3 : 4) * e->mps;
    NcmHostLayout l;
    unsigned i;

    ncm_set_alt(e, 1);
    l = ncm_out_layout(e);
    a = ncm_ntb_build_filled(e, len, big ? 1514 : 500, 7000, first);
    g_assert_cmpuint(a->len, ==, len);
    g_assert_cmpuint(a->len % e->mps, ==, 0);
    /* 2048 (high) or 3072 (super) in wBlockLength, or 0 for 64 KiB */
    g_assert_cmpuint(lduw_le_p(a->data + 8), ==, big ? 0 : len);
    ncm_frames_add(second, ncm_bcast_mac, 7100, 100);
    ncm_frames_add(second, ncm_peer_mac, 7101, 300);
    ncm_frames_add(second, ncm_other_mac, 7102, 701);
    b = ncm_ntb_build(&l, second, 1);
    g_assert_cmpuint(b->len % e->mps, !=, 0);

    ncm_mark(e);
    ncm_out_td(e, a->data, a->len);
    if (merged) {
        /* the firmware still waits for the end of the transfer */
        ncm_sock_expect_silence(e, 20);
    }
    if (zlp) {
        ncm_out_td(e, NULL, 0);
    }
    ncm_out_td(e, b->data, b->len);

    for (i = 0; i < first->len; i++) {
        g_ptr_array_add(want, g_byte_array_ref(g_ptr_array_index(first, i)));
    }
    for (i = 0; !merged && i < second->len; i++) {
        g_ptr_array_add(want, g_byte_array_ref(g_ptr_array_index(second,
                                                                 i)));
    }
    ncm_sock_expect_frames(e, want);
    ncm_sock_expect_silence(e, 50);

    ncm_assert_deltas(e, { "out_merged_transfers", merged },
                      { "out_merge_lost_datagrams", merged ? second->len : 0 },
                      { "out_ntbs", merged ? 1 : 2 },
                      { "out_datagrams", want->len }, { "out_zlps", zlp },
                      { "out_overflow_bytes", 0 });
    ncm_assert_parse_errors(e, NULL, 0);
    ncm_check_marker(e, 7200);
}

/* Cases: counters */

static void test_counters(NcmEnv *e, const NcmCase *c)
{
    bool in_vcpu_thread = *(const bool *)c->data; /* x-deferred-out=off */
    g_autoptr(GPtrArray) tx1 = ncm_frames_new();
    g_autoptr(GPtrArray) tx2 = ncm_frames_new();
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) inject = ncm_frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    uint64_t tx_bytes = 0, rx_bytes0;
    unsigned i, rx_ntbs0;

    ncm_set_alt(e, 1);
    ncm_mark(e);

    /* a short transfer, then an exact multiple ended by a ZLP */
    ncm_frames_add(tx1, ncm_bcast_mac, 7300, 60);
    ncm_frames_add(tx1, ncm_peer_mac, 7301, 777);
    ncm_frames_add(tx1, ncm_other_mac, 7302, 1514);
    ntb = ncm_ntb_build_filled(e, 2 * e->mps, 200, 7400, tx2);
    ncm_send_frames(e, tx1);
    ncm_sock_expect_frames(e, tx1);
    ncm_send(e, ntb->data, ntb->len);
    ncm_sock_expect_frames(e, tx2);
    for (i = 0; i < tx1->len; i++) {
        tx_bytes += ((GByteArray *)g_ptr_array_index(tx1, i))->len;
    }
    for (i = 0; i < tx2->len; i++) {
        tx_bytes += ((GByteArray *)g_ptr_array_index(tx2, i))->len;
    }

    /* five frames in, one filtered, one too long */
    for (i = 0; i < 5; i++) {
        ncm_frames_add(inject, i % 2 ? ncm_mac : ncm_bcast_mac, 7500 + i,
                       100 + i * 300);
        ncm_frames_add(rx, i % 2 ? ncm_mac : ncm_bcast_mac, 7500 + i,
                       100 + i * 300);
        if (i == 2) {
            ncm_frames_add(inject, ncm_other_mac, 7600, 200);
            ncm_frames_add(inject, ncm_mac, 7601, 1515);
        }
    }
    rx_ntbs0 = e->rx_ntbs;
    rx_bytes0 = e->rx_bytes;
    ncm_sock_send_frames(e, inject);
    ncm_expect_rx(e, rx);
    ncm_expect_no_rx(e);

    /* two NTBs and the ZLP, read by the bottom half unless told not to */
    ncm_assert_deltas(e, { "out_transfers", 2 },
                      { "out_deferred_packets", in_vcpu_thread ? 0 : 3 },
                      { "out_ntbs", 2 },
                      { "out_datagrams", tx1->len + tx2->len },
                      { "out_bytes", tx_bytes }, { "out_zlps", 1 },
                      { "out_merged_transfers", 0 },
                      { "in_ntbs", e->rx_ntbs - rx_ntbs0 },
                      { "in_datagrams", rx->len },
                      { "in_bytes", e->rx_bytes - rx_bytes0 },
                      { "rx_filtered", 1 }, { "rx_oversize", 1 },
                      { "link_down_drops", 0 }, { "in_flushed_datagrams", 0 });
    ncm_assert_parse_errors(e, NULL, 0);
    g_assert_cmpuint(e->rx_ntbs - rx_ntbs0, >=, 1);
}

void ncm_add_tx_cases(bool ss)
{
    static const char *const models[] = { NCM_DL, NCM_GENERIC };
    static const unsigned counts[] = { 1, 40, 0 };      /* 0: the most */
    static const bool in_vcpu_thread[] = { false, true };
    static const MergeCase merges[] = {
        { .zlp = false }, { .zlp = true },
        { .zlp = false, .block_len_0 = true },
        { .zlp = true, .block_len_0 = true },
    };
    static const char *const merge_names[] = {
        "merge/exact-multiple-no-zlp", "merge/exact-multiple-zlp",
        "merge/64k-block-length-0-no-zlp", "merge/64k-block-length-0-zlp",
    };
    unsigned m, i;

    ncm_add_case(ss, NCM_DL, "tx/1-datagram", test_tx_datagrams,
                 &counts[0], NULL);
    ncm_add_case(ss, NCM_DL, "tx/40-datagrams", test_tx_datagrams,
                 &counts[1], NULL);
    ncm_add_case(ss, NCM_DL, "tx/max-datagrams", test_tx_datagrams,
                 &counts[2], NULL);
    ncm_add_case(ss, NCM_DL, "tx/windows-pad", test_tx_windows_pad, NULL,
                 NULL);
    for (m = 0; m < ARRAY_SIZE(models); m++) {
        ncm_add_case(ss, models[m], "tx/64k-ntb", test_tx_64k, NULL, NULL);
        ncm_add_case(ss, models[m], "tx/split-ntb", test_tx_split, NULL,
                     NULL);
        ncm_add_case(ss, models[m], "tx/exact-multiple",
                     test_tx_exact_multiple, NULL, NULL);
        ncm_add_case(ss, models[m], "counters/tx-rx", test_counters,
                     &in_vcpu_thread[0], NULL);
        ncm_add_case(ss, models[m], "counters/tx-rx-in-vcpu-thread",
                     test_counters, &in_vcpu_thread[1], "x-deferred-out=off");
        for (i = 0; i < ARRAY_SIZE(merges); i++) {
            ncm_add_case(ss, models[m], merge_names[i], test_merge,
                         &merges[i], NULL);
        }
        for (i = 0; i < BAD__MAX; i++) {
            g_autofree char *name = g_strdup_printf("malformed/%s",
                                                    bad_cases[i].name);

            ncm_add_case(ss, models[m], name, test_malformed, &bad_cases[i],
                         bad_cases[i].props);
        }
    }
}
