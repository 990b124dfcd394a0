/*
 * QTest testcase for query-migrate on a QEMU that was a migration's
 * destination and then the source of a migration that failed
 *
 * Both fill_destination_migration_info() and fill_source_migration_info()
 * set the reply's error-desc from the migration's error; the second one
 * lost the first one's string, which LeakSanitizer reports when QEMU
 * exits (found by usb-ncm-dl's qtests, which migrate after every step).
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "libqtest.h"
#include "qobject/qdict.h"

#define ARGS "-machine none -nodefaults"

/* Wait until query-migrate's status is @want; "failed" only if wanted */
static QDict *wait_status(QTestState *qts, const char *want)
{
    gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;

    for (;;) {
        QDict *rsp = qtest_qmp(qts, "{'execute': 'query-migrate'}");
        QDict *ret = qdict_get_qdict(rsp, "return");
        const char *status = qdict_get_try_str(ret, "status");

        if (status && !strcmp(status, want)) {
            qobject_ref(ret);
            qobject_unref(rsp);
            return ret;
        }
        g_assert_cmpstr(status, !=, "failed");  /* (unless wanted) */
        qobject_unref(rsp);
        g_assert(g_get_monotonic_time() < deadline);
        g_usleep(1000);
    }
}

static void test_destination_then_failed_source(void)
{
    g_autofree char *dir = g_dir_make_tmp("migration-query-XXXXXX", NULL);
    g_autofree char *file = g_build_filename(dir, "stream", NULL);
    g_autofree char *out = g_strdup_printf("exec:cat > %s", file);
    g_autofree char *in = g_strdup_printf("exec:cat %s", file);
    QTestState *src, *dst;
    QDict *ret;

    /* a migration through a file, to a destination that then runs */
    src = qtest_init(ARGS);
    qtest_qmp_assert_success(src, "{'execute': 'migrate', "
                             "'arguments': {'uri': %s}}", out);
    qobject_unref(wait_status(src, "completed"));
    qtest_quit(src);
    dst = qtest_init(ARGS " -incoming defer");
    qtest_qmp_assert_success(dst, "{'execute': 'migrate-incoming', "
                             "'arguments': {'uri': %s}}", in);
    qobject_unref(wait_status(dst, "completed"));

    /* the destination migrates in turn, to nowhere: that fails */
    qtest_qmp_assert_success(dst, "{'execute': 'migrate', 'arguments': "
                             "{'uri': 'unix:/nonexistent/migration-query'}}");
    /* answered from both the incoming and the outgoing state */
    ret = wait_status(dst, "failed");
    g_assert(qdict_get_try_str(ret, "error-desc"));
    qobject_unref(ret);

    /* with ASan, QEMU exits non-zero here when a reply's string leaked */
    qtest_quit(dst);
    unlink(file);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/migration/query/destination-then-failed-source",
                   test_destination_then_failed_source);
    return g_test_run();
}
