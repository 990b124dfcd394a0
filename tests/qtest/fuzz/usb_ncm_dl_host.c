/*
 * usb-ncm-dl fuzz targets: what the host does to the device
 *
 * The QMP commands a qtest would send, done in QEMU for the in-process
 * fuzz targets (usb_ncm_dl_host.h says which).
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qapi/qapi-commands-net.h"
#include "qemu/bswap.h"
#include "qemu/error-report.h"
#include "qemu/main-loop.h"
#include "block/aio.h"
#include "net/net.h"
#include "net/queue.h"
#include "qobject/qdict.h"
#include "qom/object.h"
#include "qom/qom-qobject.h"
#include "hw/qdev-core.h"
#include "hw/usb.h"
#include "hw/usb/hcd-xhci.h"
#include "hw/usb/ncm-compat.h"
#include "hw/usb/ncm-fault.h"
#include "hw/usb/ncm-function.h"
#include "monitor/qdev.h"
#include "io/channel-buffer.h"
#include "migration/vmstate.h"
#include "migration/qemu-file-types.h"
#include "migration/qemu-file.h"
#include "migration/savevm.h"
#include "usb_ncm_dl_host.h"

/*
 * By their ids, a component at a time: a search of the whole QOM tree
 * cost 7 % of every input, and a path's parsing (object_resolve_path()
 * splits it into a string vector) 1.5 % of usb-ncm-dl-fuzz's time
 */
static Object *peripheral(const char *id)
{
    Object *dir = object_resolve_path_component(qdev_get_machine(),
                                                "peripheral");

    return dir ? object_resolve_path_component(dir, id) : NULL;
}

static DeviceState *ncm_device(void)
{
    Object *obj = object_dynamic_cast(peripheral(NCM_ID), NCM_MODEL);

    return obj ? DEVICE(obj) : NULL;
}

static Object *ncm_fault_object(void)
{
    return object_resolve_path_component(object_get_objects_root(),
                                         NCM_FAULT_ID);
}

static NetClientState *ncm_netdev(void)
{
    static NetClientState *nc;

    if (!nc) {
        nc = qemu_find_netdev(NCM_NETDEV);
        g_assert(nc);
    }
    return nc;
}

void ncm_host_netdev_flush(void)
{
    qemu_flush_queued_packets(ncm_netdev());
}

bool ncm_host_netdev_can_read(void)
{
    return qemu_can_send_packet(ncm_netdev());
}

void ncm_host_run_bottom_halves(void)
{
    int i;

    /* each call runs what was scheduled before it: a bound, not a wait */
    for (i = 0; i < 100 && aio_bh_poll(qemu_get_aio_context()); i++) {
        continue;
    }
}

void ncm_host_main_loop_once(void)
{
    main_loop_wait(true);
}

void ncm_host_netdev_send_empty(void)
{
    static const uint8_t none[1];
    NetClientState *nd = ncm_netdev();

    /*
     * Straight into the device's queue, as filter-redirector passes on
     * a frame from its chardev: qemu_send_packet() refuses a frame of
     * no bytes (patches/0039)
     */
    if (nd->peer) {
        qemu_net_queue_send(nd->peer->incoming_queue, nd,
                            QEMU_NET_PACKET_FLAG_NONE, none, 0, NULL);
    }
}

bool ncm_host_device_rx_held(void)
{
    NetClientState *nic = ncm_netdev()->peer;

    if (!nic) {
        return false;
    }
    qemu_flush_queued_packets(nic);
    /* a frame the device refused as busy says so: not held back */
    return nic->receive_disabled &&
           (!nic->info->can_receive || nic->info->can_receive(nic));
}

/* The xHCI's own state (hcd-xhci.c's "xhci-core", vmstate_xhci) */
static Object *xhci_core(void)
{
    Object *pci = peripheral(NCM_XHCI_ID);

    return pci ? object_resolve_path_component(pci, "xhci-core") : NULL;
}

bool ncm_host_device_present(void)
{
    return ncm_device() != NULL;
}

void ncm_host_device_add(const char *zlp)
{
    g_auto(GStrv) props = NULL;
    QDict *opts;
    DeviceState *dev;
    int i;

    if (ncm_device()) {
        return;
    }
    /*
     * The same properties as the command line's device: a replugged
     * device that differed (it once lacked ethernet-statistics) would
     * make every input after the first one of a run fuzz another device,
     * and GET_ETHERNET_STATISTIC was never reached in a corpus replay.
     */
    opts = qdict_new();
    qdict_put_str(opts, "driver", NCM_MODEL);
    qdict_put_str(opts, "id", NCM_ID);
    qdict_put_str(opts, "bus", NCM_XHCI_ID ".0");
    qdict_put_str(opts, "netdev", NCM_NETDEV);
    qdict_put_str(opts, "mac", NCM_MAC);
    props = g_strsplit(NCM_PROPS, ",", -1);
    for (i = 0; props[i]; i++) {
        g_auto(GStrv) kv = g_strsplit(props[i], "=", 2);

        g_assert(kv[0] && kv[1]);
        qdict_put_str(opts, kv[0], kv[1]);
    }
    if (zlp) {
        qdict_put_str(opts, "zlp", zlp);
    }
    dev = qdev_device_add_from_qdict(opts, false, &error_abort);
    object_unref(OBJECT(dev));
    qobject_unref(opts);
}

void ncm_host_device_del(void)
{
    DeviceState *dev = ncm_device();

    if (dev) {
        qdev_unplug(dev, &error_abort);
    }
}

void ncm_host_fault_set(unsigned fault, uint32_t value)
{
    if (fault < NCM_FAULT__MAX && ncm_device()) {
        object_property_set_uint(ncm_fault_object(),
                                 usb_ncm_fault_names[fault], value, NULL);
    }
}

void ncm_host_fault_corrupt_in(unsigned mode)
{
    if (ncm_device()) {
        object_property_set_str(ncm_fault_object(), NCM_FAULT_CORRUPT_IN_NAME,
                                ncm_in_corruption_names[mode %
                                                        NCM_CORRUPT__MAX],
                                NULL);
    }
}

void ncm_host_faults_clear(void)
{
    DeviceState *dev = ncm_device();
    Object *fault = ncm_fault_object();
    int i;

    if (!dev) {
        return;
    }
    /* first what a QMP user watching the faults reads (qom-get) */
    qobject_unref(object_property_get_qobject(OBJECT(dev), "x-stats",
                                              &error_abort));
    for (i = 0; i <= NCM_FAULT_CORRUPT_IN; i++) {
        const char *name = i == NCM_FAULT_CORRUPT_IN ?
                           NCM_FAULT_CORRUPT_IN_NAME :
                           usb_ncm_fault_names[i];

        qobject_unref(object_property_get_qobject(fault, name,
                                                  &error_abort));
    }
    /*
     * Last to first: replug-every-ms before replug-ms, so that a
     * detached device comes back
     */
    for (i = NCM_FAULT__MAX - 1; i >= 0; i--) {
        object_property_set_uint(fault, usb_ncm_fault_names[i],
                                 i == NCM_FAULT_REPLUG_SEED ? 1 : 0,
                                 &error_abort);
    }
    object_property_set_str(fault, NCM_FAULT_CORRUPT_IN_NAME,
                            ncm_in_corruption_names[NCM_CORRUPT_NONE],
                            &error_abort);
}

void ncm_host_set_link(bool up)
{
    qmp_set_link(NCM_NETDEV, up, &error_abort);
}

/* Migration */

static void *piece_state(NcmHostPiece piece, const VMStateDescription **vmsd)
{
    DeviceState *dev = piece == NCM_HOST_XHCI ? NULL : ncm_device();
    Object *core;

    switch (piece) {
    case NCM_HOST_DEVICE:
        *vmsd = dev ? DEVICE_GET_CLASS(dev)->vmsd : NULL;
        return dev;
    case NCM_HOST_USB_DEVICE:
        *vmsd = &vmstate_usb_device;
        return dev ? USB_DEVICE(dev) : NULL;
    default:
        core = xhci_core();
        *vmsd = &vmstate_xhci;
        return core;
    }
}

bool ncm_host_piece_present(NcmHostPiece piece)
{
    const VMStateDescription *vmsd;

    return piece_state(piece, &vmsd) != NULL;
}

const char *ncm_host_piece_name(NcmHostPiece piece)
{
    const VMStateDescription *vmsd;

    piece_state(piece, &vmsd);
    return vmsd ? vmsd->name : "(none)";
}

/*
 * One output file for every save, its channel's buffer emptied before
 * each: a QEMUFile carries a 32 KiB buffer, and with one zeroed and
 * freed for each of a migration's four saves usb-ncm-dl-fuzz ran 231-252
 * inputs/s against 269-278 (a save that fails aborts the run, so no file
 * with an error is kept)
 */
static QIOChannelBuffer *save_channel;
static QEMUFile *save_file;

GByteArray *ncm_host_save(NcmHostPiece piece)
{
    const VMStateDescription *vmsd;
    void *obj = piece_state(piece, &vmsd);
    GByteArray *b;
    int ret;

    g_assert(obj);
    if (!save_file) {
        save_channel = qio_channel_buffer_new(4096);
        save_file = qemu_file_new_output(QIO_CHANNEL(save_channel));
    }
    save_channel->usage = 0;
    save_channel->offset = 0;
    ret = NCM_VMSTATE_SAVE(save_file, vmsd, obj);
    g_assert_cmpint(ret, ==, 0);
    qemu_fflush(save_file);
    g_assert_cmpint(qemu_file_get_error(save_file), ==, 0);
    b = g_byte_array_sized_new(save_channel->usage);
    g_byte_array_append(b, save_channel->data, save_channel->usage);
    return b;
}

/*
 * In a migration stream a section footer follows the device's bytes (the
 * footer byte and the section's id): it goes after them here too, as the
 * loader peeks past the last field for subsections (a peek at the end
 * of the buffer would fail the load with -EIO), and it is checked as
 * savevm.c's check_section_footer() does, so that a load that reads
 * fewer bytes than were saved is refused as a destination refuses it.
 */
#define SECTION_FOOTER_LEN  5

static void channel_put(QIOChannelBuffer *c, NcmHostPiece piece,
                        const uint8_t *data, size_t len)
{
    uint8_t footer[SECTION_FOOTER_LEN] = { QEMU_VM_SECTION_FOOTER };

    stl_be_p(footer + 1, piece);
    c->usage = 0;
    c->offset = 0;
    qio_channel_write_all(QIO_CHANNEL(c), (const char *)data, len,
                          &error_abort);
    qio_channel_write_all(QIO_CHANNEL(c), (const char *)footer,
                          sizeof(footer), &error_abort);
    c->offset = 0;
}

static int load_section(QEMUFile *f, NcmHostPiece piece)
{
    const VMStateDescription *vmsd;
    void *obj = piece_state(piece, &vmsd);
    int ret;
    uint8_t mark;

    g_assert(obj);
    ret = NCM_VMSTATE_LOAD(f, vmsd, obj, vmsd->version_id);
    if (ret < 0) {
        return ret;
    }
    mark = qemu_get_byte(f);
    if (qemu_get_be32(f) != piece || mark != QEMU_VM_SECTION_FOOTER ||
        qemu_file_get_error(f)) {
        error_report("Missing section footer for %s", vmsd->name);
        return -EINVAL;
    }
    return 0;
}

int ncm_host_load(NcmHostPiece piece, const uint8_t *data, size_t len)
{
    QIOChannelBuffer *c = qio_channel_buffer_new(len + SECTION_FOOTER_LEN);
    QEMUFile *f;
    int ret;

    channel_put(c, piece, data, len);
    f = qemu_file_new_input(QIO_CHANNEL(c));
    ret = load_section(f, piece);
    qemu_fclose(f);
    object_unref(OBJECT(c));
    return ret;
}

/*
 * A stream this process saved, unmodified, goes through one input file,
 * as a destination reads every section from one (with a file per load,
 * usb-ncm-dl-fuzz ran 269-278 inputs/s; with one, 292-307).  A load
 * that succeeded read exactly the bytes put in (the footer says so), so
 * that nothing of one is left in the file for the next; after any
 * failure the file is dropped.  Bytes an input has changed go through
 * ncm_host_load() instead, where a load that stops early and a footer the
 * input forged cannot leave anything behind.
 */
static QIOChannelBuffer *saved_channel;
static QEMUFile *saved_file;

int ncm_host_load_saved(NcmHostPiece piece, const GByteArray *saved)
{
    int ret;

    if (!saved_file) {
        saved_channel = qio_channel_buffer_new(4096);
        saved_file = qemu_file_new_input(QIO_CHANNEL(saved_channel));
    }
    channel_put(saved_channel, piece, saved->data, saved->len);
    ret = load_section(saved_file, piece);
    if (ret < 0) {
        qemu_fclose(saved_file);
        object_unref(OBJECT(saved_channel));
        saved_file = NULL;
        saved_channel = NULL;
    }
    return ret;
}

void ncm_host_reset(NcmHostPiece piece)
{
    const VMStateDescription *vmsd;
    void *obj = piece_state(piece, &vmsd);

    if (!obj) {
        return;
    }
    if (piece == NCM_HOST_XHCI) {
        device_cold_reset(DEVICE(obj));
    } else {
        usb_device_reset(USB_DEVICE(obj));
    }
}
