/*
 * QTest fixture for usb-ncm-dl: the one migration driver
 *
 * The machine goes to a file and comes back in a new QEMU (as
 * virtio-net-failover-test does); the xHCI driver, the netdev socket and
 * the test follow it there.  lifecycle.c's migration cases use it once
 * per case; with NCM_QTEST_MIGRATE=each every case uses it at every
 * checkpoint of the xHCI driver (after each doorbell it rings and each
 * request or transfer it sees complete), so that every state a host can
 * drive the device into is saved, loaded into a fresh QEMU and carried on
 * there, with the case's assertions unchanged.
 *
 * NCM_QTEST_MIGRATE_DST=VAR takes the destination's binary from the
 * environment variable VAR (for example a QEMU of another version), as
 * QEMU's migration-test does with QTEST_QEMU_BINARY_DST; both sides then
 * need the same machine type, NCM_QTEST_MACHINE (pc-i440fx-10.0, say).
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"

static QDict *migrate_status(QTestState *qts)
{
    QDict *rsp = qtest_qmp(qts, "{'execute': 'query-migrate'}");
    QDict *ret = qdict_get_qdict(rsp, "return");

    g_assert(ret);
    qobject_ref(ret);
    qobject_unref(rsp);
    return ret;
}

/*
 * Poll query-migrate on @qts until it says completed or failed; the
 * failure's reason into *@why when @why is not NULL.
 */
static bool migrate_wait(QTestState *qts, char **why)
{
    gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;

    for (;;) {
        g_autoptr(QDict) st = migrate_status(qts);
        const char *status = qdict_get_try_str(st, "status");

        if (status && !strcmp(status, "completed")) {
            return true;
        }
        if (status && !strcmp(status, "failed")) {
            const char *desc = qdict_get_try_str(st, "error-desc") ?: "?";

            g_test_message("migration failed: %s", desc);
            if (why) {
                *why = g_strdup(desc);
            }
            return false;
        }
        g_assert(g_get_monotonic_time() < deadline);
        g_usleep(2 * 1000);
    }
}

/* A usb-ncm-fault's blocker refuses migration */
void ncm_migrate_assert_blocked(NcmEnv *e)
{
    QDict *rsp = qtest_qmp(e->qts, "{'execute': 'migrate', 'arguments': "
                           "{'uri': 'exec:cat > /dev/null'}}");
    QDict *err = qdict_get_qdict(rsp, "error");

    g_assert(err);
    g_assert(strstr(qdict_get_str(err, "desc"), "usb-ncm-fault"));
    qobject_unref(rsp);
}

/*
 * Migration is not blocked: it starts, to a socket nobody listens on, and
 * fails there; the machine runs on.
 */
void ncm_migrate_assert_unblocked(NcmEnv *e)
{
    g_autofree char *why = NULL;

    qtest_qmp_assert_success(e->qts, "{'execute': 'migrate', 'arguments': "
                             "{'uri': 'unix:/nonexistent/usb-ncm-mig'}}");
    g_assert_false(migrate_wait(e->qts, &why));
}

/* The run state of @qts, as query-status names it */
static char *run_status(QTestState *qts)
{
    QDict *rsp = qtest_qmp(qts, "{'execute': 'query-status'}");
    char *st = g_strdup(qdict_get_str(qdict_get_qdict(rsp, "return"),
                                      "status"));

    qobject_unref(rsp);
    return st;
}

/*
 * Save the machine to @file; the source stops.  False, with the reason
 * in *@why, when the source refuses (a migration blocker): it then runs
 * on as before.
 */
static bool migrate_save(NcmEnv *e, const char *file, char **why)
{
    g_autofree char *uri = g_strdup_printf("exec:cat > %s", file);
    QDict *rsp;

    g_autofree char *status = run_status(e->qts);

    /* the destination runs after the load only if the source ran */
    e->mig.src_running = !strcmp(status, "running");
    /* (qtest reads the clock only by moving it: by 1 ns, ncm_clock_ns) */
    e->mig.src_clock_ns = ncm_clock_ns(e);
    rsp = qtest_qmp(e->qts, "{'execute': 'migrate', 'arguments': "
                    "{'uri': %s}}", uri);
    QDict *err = qdict_get_qdict(rsp, "error");
    bool ok;

    if (err) {
        *why = g_strdup(qdict_get_try_str(err, "desc") ?: "?");
        qobject_unref(rsp);
        return false;
    }
    qobject_unref(rsp);
    ok = migrate_wait(e->qts, why);
    g_assert(ok);
    return ok;
}

/*
 * The destination QEMU: the binary the environment variable that
 * NCM_QTEST_MIGRATE_DST names says, else QTEST_QEMU_BINARY.  (libqtest
 * has a call for this, but it was renamed between QEMU 10.0 and 10.2:
 * QTEST_QEMU_BINARY is set around qtest_init() instead.)
 */
static QTestState *migrate_start_destination(const char *args)
{
    const char *var = g_getenv("NCM_QTEST_MIGRATE_DST");
    const char *bin = var ? g_getenv(var) : NULL;
    g_autofree char *saved = g_strdup(g_getenv("QTEST_QEMU_BINARY"));
    QTestState *dst;

    if (!bin) {
        return qtest_init(args);
    }
    g_setenv("QTEST_QEMU_BINARY", bin, true);
    dst = qtest_init(args);
    g_setenv("QTEST_QEMU_BINARY", saved, true);
    return dst;
}

/*
 * Start a destination with @props for the adapter (the binary named by
 * the environment variable NCM_QTEST_MIGRATE_DST names, else the
 * source's) and load @file there.  Returns it, or NULL (and it is gone)
 * when it refused the state, with the reason in *@why.
 */
static QTestState *migrate_load(NcmEnv *e, const char *file,
                                const char *props, int *sock, char **why)
{
    g_autofree char *fw = ncm_firmware_args();
    g_autofree char *in = g_strdup_printf("exec:cat %s", file);
    g_autofree char *args = NULL;
    const char *machine = g_getenv("NCM_QTEST_MACHINE");
    QTestState *dst;
    int sv[2];

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    args = g_strdup_printf("-nodefaults%s -netdev socket,id=n0,fd=%d "
                           "-device qemu-xhci,id=xhci,addr=04.0%s "
                           "-device %s,id=ncm0,bus=xhci.0,netdev=n0,"
                           "mac=" NCM_MAC_STR "%s%s%s%s -S -incoming defer",
                           fw, sv[1], e->c->super ? "" : ",p3=0",
                           e->c->model, props ? "," : "", props ? props : "",
                           machine ? " -machine " : "", machine ?: "");
    dst = migrate_start_destination(args);
    close(sv[1]);
    /*
     * With -accel qtest the virtual clock is qtest's own and does not
     * migrate: start the destination's where the source's stopped, so
     * that the timers in the stream (absolute times) keep their meaning.
     */
    qtest_clock_set(dst, e->mig.src_clock_ns);
    /* the backend's link is the host's setting, not the guest's state */
    if (e->mig.link_down) {
        qtest_qmp_assert_success(dst, "{'execute': 'set_link', "
                                 "'arguments': {'name': 'ncm0', "
                                 "'up': false}}");
    }
    qtest_qmp_assert_success(dst, "{'execute': 'migrate-incoming', "
                             "'arguments': {'uri': %s, "
                             "'exit-on-error': false}}", in);
    if (!migrate_wait(dst, why)) {
        close(sv[0]);
        qtest_quit(dst);
        return NULL;
    }
    *sock = sv[0];
    /* (-S: what was loaded can be read before the destination runs) */
    if (e->mig.sent) {
        qobject_unref(e->mig.loaded_stats);
        e->mig.loaded_stats = ncm_stats_raw_of(dst);
    }
    if (e->mig.src_running) {
        qtest_qmp_assert_success(dst, "{'execute': 'cont'}");
    }
    return dst;
}

static GByteArray *migrate_frames_not_taken(NcmEnv *e, QDict *src_stats);
static void migrate_carry_received(NcmEnv *e);
static void stats_add_diff(QDict *into, QDict *a, QDict *b);

/*
 * The source saved and stopped (migrate-each, or a case's own
 * migration while migrate-each runs): what is not the guest's state is
 * taken from it now, and handed to the destination by
 * ncm_follow_migration(), or dropped if the destination refuses.
 */
static void migrate_saved(NcmEnv *e)
{
    if (!e->mig.sent) {
        return;
    }
    qobject_unref(e->mig.src_stats);
    e->mig.src_stats = ncm_stats_raw(e);
    migrate_carry_received(e);
    if (e->mig.resend) {
        g_byte_array_unref(e->mig.resend);
    }
    e->mig.resend = migrate_frames_not_taken(e, e->mig.src_stats);
}

static void migrate_forget_saved(NcmEnv *e)
{
    qobject_unref(e->mig.src_stats);
    e->mig.src_stats = NULL;
    qobject_unref(e->mig.loaded_stats);
    e->mig.loaded_stats = NULL;
    if (e->mig.resend) {
        g_byte_array_unref(e->mig.resend);
        e->mig.resend = NULL;
    }
}

void ncm_migrate_save(NcmEnv *e, const char *file)
{
    g_autofree char *why = NULL;

    if (!migrate_save(e, file, &why)) {
        g_test_message("the source refused to migrate: %s", why);
        g_assert_not_reached();
    }
    migrate_saved(e);
}

QTestState *ncm_migrate_load(NcmEnv *e, const char *file,
                             const char *props, int *sock)
{
    g_autofree char *why = NULL;
    QTestState *dst = migrate_load(e, file, props, sock, &why);

    /* the adapter's properties from here on, for migrate-each too */
    if (dst) {
        g_free(e->mig.props);
        e->mig.props = g_strdup(props);
    } else {
        /* the source goes on: its counters and sockets are still good */
        migrate_forget_saved(e);
    }
    return dst;
}

QTestState *ncm_migrate_via_file(NcmEnv *e, const char *file,
                                 const char *props, int *sock)
{
    ncm_migrate_save(e, file);
    return ncm_migrate_load(e, file, props, sock);
}

/* The test goes on with the destination: QEMU, netdev socket, driver. */
void ncm_follow_migration(NcmEnv *e, QTestState *dst, int sock)
{
    close(e->sock);
    e->sock = sock;
    e->pdev = qxhci_follow_migration(e->qs, e->xhci, e->pdev, NCM_XHCI_DEVFN,
                                     dst);
    e->qts = dst;
    /*
     * x-stats' debug counters start again at zero on the destination,
     * the ones the stream carries where they were: what was loaded
     * before it ran; the frames the device had not taken go again
     */
    if (e->mig.busy && e->mig.src_stats && e->mig.loaded_stats) {
        stats_add_diff(e->mig.stats_offset, e->mig.src_stats,
                       e->mig.loaded_stats);
    } else if (e->mig.stats_offset) {
        /*
         * The case's own migration: it sees the destination's counters
         * as they are, as it would without migrate-each
         */
        qobject_unref(e->mig.stats_offset);
        e->mig.stats_offset = qdict_new();
    }
    if (e->mig.resend) {
        e->mig.frames_taken_before = e->mig.frames_taken_next;
        if (e->mig.resend->len) {
            ncm_sock_write_raw(e, e->mig.resend->data, e->mig.resend->len);
        }
    }
    migrate_forget_saved(e);
}

/* Migrate-each mode */

bool ncm_migrate_each_wanted(void)
{
    return !g_strcmp0(g_getenv("NCM_QTEST_MIGRATE"), "each");
}

/* @into += @a - @b, key by key, nested dictionaries too */
static void stats_add_diff(QDict *into, QDict *a, QDict *b)
{
    const QDictEntry *ent;

    for (ent = qdict_first(a); ent; ent = qdict_next(a, ent)) {
        const char *k = qdict_entry_key(ent);
        QObject *v = qdict_entry_value(ent);

        if (qobject_type(v) == QTYPE_QDICT) {
            QDict *sub = qdict_get_qdict(into, k);

            if (!sub) {
                sub = qdict_new();
                qdict_put(into, k, sub);
            }
            if (qdict_get_qdict(b, k)) {
                stats_add_diff(sub, qobject_to(QDict, v),
                               qdict_get_qdict(b, k));
            }
        } else if (qobject_type(v) == QTYPE_QNUM && qdict_haskey(b, k)) {
            int64_t d = qdict_get_int(a, k) - qdict_get_int(b, k);

            qdict_put_int(into, k, qdict_get_try_int(into, k, 0) + d);
        }
    }
}

/* @stats += @off, key by key */
/* @stats += @off, key by key, nested dictionaries too */
static void stats_add(QDict *stats, QDict *off)
{
    const QDictEntry *ent;

    for (ent = qdict_first(off); ent; ent = qdict_next(off, ent)) {
        const char *k = qdict_entry_key(ent);
        QObject *v = qdict_entry_value(ent);

        if (qobject_type(v) == QTYPE_QDICT) {
            if (qdict_get_qdict(stats, k)) {
                stats_add(qdict_get_qdict(stats, k), qobject_to(QDict, v));
            }
        } else if (qdict_haskey(stats, k)) {
            qdict_put_int(stats, k, qdict_get_int(stats, k) +
                          qdict_get_int(off, k));
        }
    }
}

void ncm_migrate_stats_adjust(NcmEnv *e, QDict *stats)
{
    if (e->mig.stats_offset) {
        stats_add(stats, e->mig.stats_offset);
    }
}

/* What the test wrote to the netdev socket: frames QEMU may not have read */
void ncm_migrate_note_sent(NcmEnv *e, const uint8_t *buf, size_t len,
                           const uint32_t *frame_starts, unsigned nframes)
{
    unsigned i;

    if (!e->mig.sent) {
        return;
    }
    for (i = 0; i < nframes; i++) {
        uint32_t start = e->mig.sent->len + frame_starts[i];

        g_array_append_val(e->mig.sent_frames, start);
    }
    e->mig.frames_sent += nframes;
    g_byte_array_append(e->mig.sent, buf, len);
}

/*
 * The frames the test wrote that the device has not taken (x-stats
 * rx_frames_taken, counted across migrations): QEMU's socket netdev keeps
 * a frame it read in part, and the frames it read but the device could
 * not take yet wait in the net layer's queue; none of that is the
 * guest's state, and none of it migrates.  They go to the destination's
 * socket again, in order.
 */
static GByteArray *migrate_frames_not_taken(NcmEnv *e, QDict *src_stats)
{
    GByteArray *rest = g_byte_array_new();
    uint64_t taken = e->mig.frames_taken_before +
                     qdict_get_int(src_stats, "rx_frames_taken");
    uint64_t first, skip;
    uint32_t from;
    unsigned i;

    /* what the destination's counter, from zero, adds to */
    e->mig.frames_taken_next = taken;
    /* e->mig.sent holds the frames from number @first on */
    first = e->mig.frames_sent - e->mig.sent_frames->len;
    g_assert_cmpuint(taken, >=, first);
    g_assert_cmpuint(taken, <=, e->mig.frames_sent);
    skip = taken - first;
    from = skip < e->mig.sent_frames->len ?
        g_array_index(e->mig.sent_frames, uint32_t, skip) :
        e->mig.sent->len;
    g_byte_array_append(rest, e->mig.sent->data + from,
                        e->mig.sent->len - from);
    /* the log keeps these frames: they go to the new socket */
    g_byte_array_remove_range(e->mig.sent, 0, from);
    g_array_remove_range(e->mig.sent_frames, 0, skip);
    for (i = 0; i < e->mig.sent_frames->len; i++) {
        g_array_index(e->mig.sent_frames, uint32_t, i) -= from;
    }
    return rest;
}

/* What QEMU wrote to the old socket and the test has not read yet */
static void migrate_carry_received(NcmEnv *e)
{
    uint8_t buf[4096];
    ssize_t n;

    while ((n = recv(e->sock, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        g_byte_array_append(e->mig.recv_carry, buf, n);
    }
}

/*
 * Take up to @len bytes the old socket had carried over; returns how many.
 */
size_t ncm_migrate_take_carried(NcmEnv *e, uint8_t *buf, size_t len)
{
    size_t n;

    if (!e->mig.recv_carry || !e->mig.recv_carry->len) {
        return 0;
    }
    n = MIN(len, e->mig.recv_carry->len);
    memcpy(buf, e->mig.recv_carry->data, n);
    g_byte_array_remove_range(e->mig.recv_carry, 0, n);
    return n;
}

static void migrate_each_step(NcmEnv *e)
{
    g_autofree char *file = g_strdup_printf("%s/usb-ncm-each-%d",
                                            g_get_tmp_dir(), getpid());
    g_autofree char *why = NULL;
    g_autofree char *status = run_status(e->qts);
    QTestState *dst;
    int sock = -1;

    /*
     * The case migrated on its own and the destination refused: the
     * source waits, stopped, for the case to go on (cont)
     */
    if (!strcmp(status, "postmigrate")) {
        e->mig.skipped++;
        return;
    }
    if (!migrate_save(e, file, &why)) {
        /* a fault is active (usb-ncm-fault): migration is refused */
        g_test_message("migrate-each: the source (%s) refused: %s", status,
                       why);
        g_assert(why && strstr(why, "usb-ncm-fault"));
        e->mig.blocked++;
        return;
    }
    migrate_saved(e);
    dst = migrate_load(e, file, e->mig.props, &sock, &why);
    unlink(file);
    if (!dst) {
        g_test_message("migrate-each: step %u: the destination refused "
                       "what the source saved: %s", e->mig.done + 1, why);
    }
    g_assert(dst);
    ncm_follow_migration(e, dst, sock);
    e->mig.done++;
}

static void migrate_each_checkpoint(QXhci *x, void *opaque)
{
    NcmEnv *e = opaque;

    if (!e->mig.on || e->mig.busy) {
        return;
    }
    e->mig.busy = true;
    migrate_each_step(e);
    e->mig.busy = false;
}

void ncm_migrate_each_start(NcmEnv *e)
{
    e->mig.props = g_strdup(e->c->props);
    e->mig.stats_offset = qdict_new();
    e->mig.sent = g_byte_array_new();
    e->mig.sent_frames = g_array_new(false, false, sizeof(uint32_t));
    e->mig.recv_carry = g_byte_array_new();
    qxhci_set_checkpoint(e->xhci, migrate_each_checkpoint, e);
    e->mig.on = true;
}

void ncm_migrate_each_stop(NcmEnv *e, const char *why)
{
    if (e->mig.on) {
        g_test_message("migrate-each: stops after %u migrations: %s",
                       e->mig.done, why);
        e->mig.on = false;
        e->mig.stopped = true;
    }
}

void ncm_migrate_each_end(NcmEnv *e)
{
    if (!e->mig.stats_offset) {
        return;
    }
    e->mig.on = false;
    qxhci_set_checkpoint(e->xhci, NULL, NULL);
    g_test_message("migrate-each: %u migrations, %u refused by a fault's "
                   "blocker, %u skipped after the case's own migration",
                   e->mig.done, e->mig.blocked, e->mig.skipped);
    /* a case that ran to its end without one checked nothing here */
    g_assert(e->mig.done + e->mig.blocked > 0 || e->mig.stopped);
    qobject_unref(e->mig.stats_offset);
    e->mig.stats_offset = NULL;
    g_byte_array_unref(e->mig.sent);
    e->mig.sent = NULL;
    g_array_unref(e->mig.sent_frames);
    e->mig.sent_frames = NULL;
    g_byte_array_unref(e->mig.recv_carry);
    e->mig.recv_carry = NULL;
    g_free(e->mig.props);
    e->mig.props = NULL;
    migrate_forget_saved(e);
}
