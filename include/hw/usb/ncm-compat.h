/*
 * usb-ncm-dl: what differs between the QEMU releases the overlay builds on
 *
 * The overlay is built against QEMU 10.0.x (Debian trixie) and 10.2.x
 * (Debian sid).  Every API difference that reaches our C files is handled
 * here and nowhere else.  This header is not part of the upstream
 * submission: scripts/upstream/make-series.sh drops its #include and
 * spells each type below the way the target tree needs it.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_USB_NCM_COMPAT_H
#define HW_USB_NCM_COMPAT_H

/*
 * TypeInfo.class_init takes "const void *data" since QEMU 10.1 and
 * "void *data" before.  QEMU_VERSION_* come from config-host.h, which
 * qemu/osdep.h includes first.
 */
#if QEMU_VERSION_MAJOR > 10 || \
    (QEMU_VERSION_MAJOR == 10 && QEMU_VERSION_MINOR >= 1)
typedef const void NcmClassInitData;
#else
typedef void NcmClassInitData;
#endif

/*
 * vmstate_save_state() and vmstate_load_state() take an Error ** as their
 * last argument since QEMU 10.1 (the fuzz targets pass NULL: QEMU's own
 * error_report() names the field either way).
 */
#if QEMU_VERSION_MAJOR > 10 || \
    (QEMU_VERSION_MAJOR == 10 && QEMU_VERSION_MINOR >= 1)
#define NCM_VMSTATE_SAVE(f, vmsd, obj) \
    vmstate_save_state(f, vmsd, obj, NULL, NULL)
#define NCM_VMSTATE_LOAD(f, vmsd, obj, version_id) \
    vmstate_load_state(f, vmsd, obj, version_id, NULL)
#else
#define NCM_VMSTATE_SAVE(f, vmsd, obj) \
    vmstate_save_state(f, vmsd, obj, NULL)
#define NCM_VMSTATE_LOAD(f, vmsd, obj, version_id) \
    vmstate_load_state(f, vmsd, obj, version_id)
#endif

#endif /* HW_USB_NCM_COMPAT_H */
