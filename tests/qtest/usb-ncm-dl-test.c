/*
 * QTest testcase for the USB CDC-NCM adapters usb-ncm-dl and usb-ncm
 *
 * The device sits on a qemu-xhci driven by libqos/xhci-driver.c, at super
 * speed or (with p3=0) high speed; its netdev is one end of a socketpair,
 * so the test writes the frames the device receives and reads the frames
 * it sends (each a 4-byte big-endian length and the frame).
 *
 * The cases live in tests/qtest/usb-ncm-dl/, one file per area, on a
 * shared fixture (usb-ncm-dl/fixture.h: boot, enumeration, socket peer,
 * NTB builder and checker, x-stats marks).
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "usb-ncm-dl/fixture.h"

static void add_speed(bool ss)
{
    ncm_add_control_cases(ss);
    ncm_add_tx_cases(ss);
    ncm_add_rx_cases(ss);
    ncm_add_fault_cases(ss);
    ncm_add_lifecycle_cases(ss);
    ncm_add_spec_cases(ss);
    ncm_add_replay_cases(ss);
    ncm_add_host_cases(ss);
    ncm_add_stream_cases(ss);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    ncm_add_oracle_cases();
    ncm_add_ehci_cases();
    ncm_add_ohci_cases();
    ncm_add_hcd_cases();
    ncm_add_desc_cases();

    if (!qtest_has_device("qemu-xhci") ||
        !qtest_has_device("usb-ncm-dl")) {
        g_test_message("qemu-xhci or usb-ncm-dl not available");
        return g_test_run();
    }
    add_speed(true);
    add_speed(false);
    return g_test_run();
}
