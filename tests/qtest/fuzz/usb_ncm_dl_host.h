/*
 * usb-ncm-dl fuzz targets: what the host does to the device
 *
 * A qtest drives the guest's side through qtest commands (libqos) and the
 * host's side through QMP: device_add and device_del, qom-get and qom-set
 * on the usb-ncm-fault object, set_link, and a migration.  QEMU's
 * in-process fuzzing has no QMP, so these few operations are done here,
 * in QEMU, each the way the QMP command it stands for does it; the
 * targets (usb_ncm_dl_fuzz.c) reach QEMU through libqtest, libqos and
 * this interface only.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef USB_NCM_DL_HOST_H
#define USB_NCM_DL_HOST_H

/* The machine's device and its backends, as the command line names them */
#define NCM_ID              "ncm0"
#define NCM_FAULT_ID        "ncm-fault"     /* its usb-ncm-fault */
#define NCM_NETDEV          "n0"
#define NCM_MAC             "52:54:00:12:34:56"
#define NCM_MODEL           "usb-ncm-dl"
#define NCM_XHCI_ID         "xhci"
/* every optional request on, so that the fuzzer can reach them all */
#define NCM_PROPS           "network-capabilities=0x3b,multicast-filters=16," \
                            "ethernet-statistics=0x1ffff"

/* device_add: the device with NCM_PROPS, and zlp=@zlp unless NULL */
void ncm_host_device_add(const char *zlp);
/* device_del of the device, if there is one */
void ncm_host_device_del(void);
bool ncm_host_device_present(void);

/*
 * qom-set of the usb-ncm-fault property @fault (UsbNcmFaultProp below
 * NCM_FAULT__MAX) to @value; ignored without a device, a value out of
 * range refused as QMP would refuse it
 */
void ncm_host_fault_set(unsigned fault, uint32_t value);
/* qom-set corrupt-in to the corruption mode @mode (modulo their number) */
void ncm_host_fault_corrupt_in(unsigned mode);
/*
 * What a QMP user watching the faults reads (qom-get of the device's
 * x-stats and of every fault), then every fault back to its default
 */
void ncm_host_faults_clear(void);
/* set_link of the device's netdev */
void ncm_host_set_link(bool up);

/*
 * The netdev (-netdev socket, id NCM_NETDEV) as the main loop drives it:
 * ncm_host_netdev_flush() sends the frames it queued while its socket was
 * full, as the main loop does once the socket is writable again;
 * ncm_host_netdev_can_read() says whether it would read a frame from its
 * socket now (the device takes frames).
 */
void ncm_host_netdev_flush(void);
bool ncm_host_netdev_can_read(void);
/* The bottom halves that are due, as a main loop iteration runs them */
void ncm_host_run_bottom_halves(void);
/* One main loop iteration that does not wait: fd handlers, timers, BHs */
void ncm_host_main_loop_once(void);
/*
 * A frame of no bytes from the netdev into the device's queue, as
 * filter-redirector passes one on from its chardev; qemu_send_packet()
 * refuses them (patches/0039).
 */
void ncm_host_netdev_send_empty(void);
/*
 * After the device's receive queue was flushed: whether it holds frames
 * back although the device says it takes frames (its can_receive).
 */
bool ncm_host_device_rx_held(void);

/*
 * qtest_clock_step() through the qtest protocol: the name the linker
 * gives the unwrapped function (-Wl,-wrap,qtest_clock_step, which
 * qtest_wrappers.c's __wrap_qtest_clock_step() replaces)
 */
struct QTestState;
int64_t __real_qtest_clock_step(struct QTestState *s, int64_t step);

/*
 * A migration, one piece of the machine at a time: the device's
 * VMState section (the USBDevice part the USB core writes first), that
 * part alone, or the xHCI's.  ncm_host_save() returns the section's
 * bytes as the source writes them; ncm_host_load() loads bytes into the
 * piece as a destination does, section footer and all, and returns what
 * vmstate_load_state() returned (QEMU's error_report() has named the
 * field of a refusal), or -EINVAL if the load left bytes unread;
 * ncm_host_load_saved() does the same with what ncm_host_save() returned,
 * unmodified, faster; ncm_host_reset() resets the piece as a
 * destination's machine is reset before the load.
 */
typedef enum NcmHostPiece {
    NCM_HOST_DEVICE,
    NCM_HOST_USB_DEVICE,
    NCM_HOST_XHCI,
} NcmHostPiece;

bool ncm_host_piece_present(NcmHostPiece piece);
const char *ncm_host_piece_name(NcmHostPiece piece);
GByteArray *ncm_host_save(NcmHostPiece piece);
int ncm_host_load(NcmHostPiece piece, const uint8_t *data, size_t len);
int ncm_host_load_saved(NcmHostPiece piece, const GByteArray *saved);
void ncm_host_reset(NcmHostPiece piece);

#endif /* USB_NCM_DL_HOST_H */
