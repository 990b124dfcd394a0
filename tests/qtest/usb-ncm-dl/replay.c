/*
 * usb-ncm-dl qtest: determinism, the precondition of record/replay
 *
 * Record/replay (-icount rr=record/replay) reproduces a run only if what
 * the device does follows from what the host and the netdev did and when,
 * in virtual time: nothing from the host's clock, the host's scheduling
 * or a random source.  A guest test records and replays a whole Linux run
 * (tests/guest/run-replay-test.sh); this case fails faster: it runs one
 * transfer script in two fresh QEMUs, the second with the host stalling
 * at random between the steps, and requires the same trace of the
 * device's usb_ncm_* events, the same x-stats and the same outcome where
 * the script waits for nothing but the virtual clock (port changes of
 * periodic re-enumeration).
 *
 * -icount needs TCG, and the libqos xHCI driver needs the qtest
 * accelerator's clock_step: both runs use the qtest accelerator, whose
 * virtual clock moves only when the test steps it.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"
#include "qobject/qjson.h"

typedef struct ReplayRun {
    char *trace;                /* the usb_ncm_* events, in order */
    char *stats;                /* x-stats at the end, as JSON */
    GString *times;             /* what happened in virtual-time waits */
} ReplayRun;

/* Host-side delays in the second run: the device must not see them. */
static void host_stall(bool perturb, GRand *r)
{
    if (perturb) {
        g_usleep(g_rand_int_range(r, 0, 20000));
    }
}

/* Step the virtual clock by @ns exactly, servicing the controller. */
static void run_for(NcmEnv *e, int64_t ns)
{
    int64_t end = ncm_clock_ns(e) + ns;
    int64_t now;

    while ((now = ncm_clock_ns(e)) < end) {
        qtest_clock_step(e->qts, MIN(end - now, 1 * NCM_MS));
        qxhci_step(e->xhci);
    }
}

/*
 * Read notifications until NETWORK_CONNECTION(@up), noting each one's
 * code and value (the device may repeat SPEED_CHANGE and the connection
 * state before it): the sequence must be the same in both runs.
 */
static void await_connection(NcmEnv *e, bool up, ReplayRun *run)
{
    uint8_t b[16];
    unsigned i;

    for (i = 0; i < 6; i++) {
        uint32_t n = ncm_notify_read(e, b, NCM_RX_TIMEOUT_NS);

        g_assert_cmpuint(n, >=, 8);
        g_string_append_printf(run->times, "notification:0x%02x:%u\n",
                               b[1], lduw_le_p(b + 2));
        if (b[1] == 0x00 && lduw_le_p(b + 2) == up) {
            ncm_expect_connection(b, n, up);
            return;
        }
    }
    g_assert_not_reached();
}

static void replay_script(NcmEnv *e, bool perturb, ReplayRun *run)
{
    g_autoptr(GRand) r = g_rand_new_with_seed(0x5eed);
    unsigned round, i;

    ncm_set_alt(e, 1);
    ncm_expect_link_up(e);

    for (round = 0; round < 6; round++) {
        g_autoptr(GPtrArray) tx = ncm_frames_new();
        g_autoptr(GPtrArray) rx = ncm_frames_new();

        /* OUT: one NTB of 1 to 6 datagrams, each size its own */
        for (i = 0; i <= round; i++) {
            ncm_frames_add(tx, ncm_bcast_mac, 60000 + round * 10 + i,
                           60 + (round * 331 + i * 97) % 1450);
        }
        ncm_send_frames(e, tx);
        ncm_sock_expect_frames(e, tx);
        host_stall(perturb, r);

        /* IN: a burst, all taken in before the host asks for it */
        for (i = 0; i < 2 + round; i++) {
            ncm_frames_add(rx, ncm_mac, 61000 + round * 10 + i,
                           64 + (round * 211 + i * 113) % 1450);
        }
        ncm_sock_send_frames(e, rx);
        ncm_sock_settle(e);
        host_stall(perturb, r);
        ncm_expect_rx(e, rx);
        host_stall(perturb, r);
    }

    /* a link flap: down, and up again (speed, then connection) 200 ms later */
    ncm_fault_set(e, "link-down-ms", 200);
    await_connection(e, false, run);
    host_stall(perturb, r);
    run_for(e, 210 * NCM_MS);
    await_connection(e, true, run);

    /*
     * Two IN TDs queued at once, then frames for each in turn: whether
     * the first NTB is kept open for more (IN coalescing) is decided on
     * the virtual clock, never the host's
     */
    {
        g_autoptr(GPtrArray) first = ncm_frames_new();
        g_autoptr(GPtrArray) second = ncm_frames_new();
        QXhciTransfer *t[2];

        ncm_in_submit_queued(e, t, 2, e->p.in_max);
        host_stall(perturb, r);
        ncm_frames_add(first, ncm_mac, 62000, 300);
        ncm_frames_add(first, ncm_mac, 62001, 1400);
        ncm_frames_add(second, ncm_mac, 62010, 900);
        ncm_in_fill_in_turn(e, t, first, second, e->in_size);
        qxhci_transfer_free(t[0]);
        qxhci_transfer_free(t[1]);
    }

    /* re-enumeration with a seeded jitter: periodic, for 1.5 s */
    ncm_fault_set(e, "replug-seed", 7);
    ncm_fault_set(e, "replug-every-ms", 300);
    host_stall(perturb, r);
    run_for(e, 1500 * NCM_MS);
    ncm_fault_set(e, "replug-every-ms", 0);
    g_string_append_printf(run->times, "replug-port-events:%d\n",
                           qxhci_take_port_events(e->xhci, e->port));
    run_for(e, 500 * NCM_MS);
}

static void replay_run(const NcmCase *c, bool perturb, ReplayRun *run)
{
    g_autofree char *dir = g_dir_make_tmp("ncm-replay-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "trace", NULL);
    NcmEnv *e = ncm_start(c);
    g_autoptr(QDict) stats = NULL;
    g_autoptr(GString) json = NULL;
    g_autofree char *rsp = NULL;

    g_assert(dir);
    rsp = qtest_hmp(e->qts, "logfile %s", path);
    g_assert_cmpstr(rsp, ==, "");
    g_free(rsp);
    rsp = qtest_hmp(e->qts, "log trace:usb_ncm_*");
    g_assert_cmpstr(rsp, ==, "");

    run->times = g_string_new(NULL);
    replay_script(e, perturb, run);
    stats = ncm_stats(e);
    json = qobject_to_json(QOBJECT(stats));
    run->stats = g_strdup(json->str);
    /* QEMU exits: the log is flushed and closed */
    ncm_stop(e);
    g_assert(g_file_get_contents(path, &run->trace, NULL, NULL));
    unlink(path);
    rmdir(dir);
}

/* The first line where @a and @b differ, for the failure message */
static void report_first_difference(const char *a, const char *b)
{
    g_auto(GStrv) la = g_strsplit(a, "\n", -1);
    g_auto(GStrv) lb = g_strsplit(b, "\n", -1);
    unsigned i;

    for (i = 0; la[i] && lb[i]; i++) {
        if (strcmp(la[i], lb[i])) {
            break;
        }
    }
    g_test_message("trace line %u: '%s' then '%s'", i + 1,
                   la[i] ? la[i] : "(end)", lb[i] ? lb[i] : "(end)");
}

static void test_replay_deterministic(NcmEnv *e, const NcmCase *c)
{
    ReplayRun a = { 0 }, b = { 0 };
    unsigned lines = 0;
    const char *p;

    /* the case's machines are its own two runs, not the fixture's */
    ncm_migrate_each_stop(e, "runs QEMU twice itself");
    replay_run(c, false, &a);
    replay_run(c, true, &b);
    for (p = a.trace; *p; p++) {
        lines += *p == '\n';
    }
    g_test_message("%u trace events per run", lines);
    /* the script moves data both ways, flaps the link and replugs */
    g_assert(strstr(a.trace, "OUT NTB"));
    g_assert(strstr(a.trace, "IN NTB"));
    g_assert(strstr(a.trace, "link-down-ms="));
    g_assert(strstr(a.trace, "usb_ncm_replug"));
    if (strcmp(a.trace, b.trace)) {
        report_first_difference(a.trace, b.trace);
    }
    g_assert_cmpstr(a.trace, ==, b.trace);
    g_assert_cmpstr(a.stats, ==, b.stats);
    g_assert_cmpstr(a.times->str, ==, b.times->str);
    g_free(a.trace);
    g_free(b.trace);
    g_free(a.stats);
    g_free(b.stats);
    g_string_free(a.times, true);
    g_string_free(b.times, true);
}

void ncm_add_replay_cases(bool ss)
{
    /* the packet size changes nothing here: super speed only */
    if (ss) {
        ncm_add_case(ss, NCM_DL, "replay/same-script-same-trace",
                     test_replay_deterministic, NULL, NULL);
    }
}
