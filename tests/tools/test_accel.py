#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# ACCEL=auto|kvm|tcg (tests/guest/accel.sh) against a fake QEMU: a shell
# script that lists or leaves out kvm in "-accel help" and, booted under
# KVM, reaches /init, hangs, or exits with an error, as FAKE_KVM says.
# Each case checks the choice, the reason given and how many probe boots
# were made, so a probe that is skipped, not cached, cached across reboots
# or trusted when the guest hangs fails here.  A fake /sys/module
# (NCM_SYS_MODULE_DIR, kvm and kvm_intel unless a case says otherwise)
# says which KVM /dev/kvm is: with kvm_pvm alone, no probe boot is made.
import os
import subprocess
import tempfile
import time
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

FAKE_QEMU = r"""#!/bin/bash
if [ "$1 $2" = "-accel help" ]; then
    echo "Accelerators supported in QEMU binary:"
    echo tcg
    [ "$FAKE_BUILT" = 0 ] || echo kvm
    exit 0
fi
serial=""
prev=""
for a in "$@"; do
    [ "$prev" = -serial ] && serial=${a#file:}
    prev=$a
done
echo boot >> "$FAKE_COUNT"
case $FAKE_KVM in
works) sleep 0.3; echo "NCMTEST phase=boot" > "$serial"; sleep 30 ;;
hang) echo "Probing EDD ... ok" > "$serial"; sleep 30 ;;
fail) echo "qemu-system-x86_64: failed to set MSR 0x10a" >&2; exit 1 ;;
esac
"""

DRIVER = r"""
set -e
NCM_TOP=$1
. "$NCM_TOP/scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/accel.sh"
guest_accel_pick "$FAKE_QEMU_BIN" /k /i
echo "ACCEL_RESULT=$GUEST_ACCEL"
echo "ACCEL_WHY=$GUEST_ACCEL_WHY"
"""


class AccelTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.qemu = os.path.join(d, "qemu")
        with open(self.qemu, "w") as f:
            f.write(FAKE_QEMU)
        os.chmod(self.qemu, 0o755)
        self.kvm = os.path.join(d, "kvm")
        open(self.kvm, "w").close()
        self.boot_id = os.path.join(d, "boot_id")
        self.set_boot("11111111-aaaa")
        self.count = os.path.join(d, "count")
        self.cache = os.path.join(d, "cache", "accel-probe")
        self.modules = os.path.join(d, "module")
        self.set_modules("kvm", "kvm_intel")

    def tearDown(self):
        self.tmp.cleanup()

    def set_boot(self, bid):
        with open(self.boot_id, "w") as f:
            f.write(bid + "\n")

    def set_modules(self, *names):
        if os.path.isdir(self.modules):
            for n in os.listdir(self.modules):
                os.rmdir(os.path.join(self.modules, n))
        for n in names:
            os.makedirs(os.path.join(self.modules, n))

    def boots(self):
        if not os.path.exists(self.count):
            return 0
        with open(self.count) as f:
            return len(f.read().split())

    def pick(self, accel, fake_kvm="works", built=True, **extra):
        env = dict(os.environ, ACCEL=accel, FAKE_KVM=fake_kvm,
                   FAKE_BUILT="1" if built else "0",
                   FAKE_QEMU_BIN=self.qemu, FAKE_COUNT=self.count,
                   NCM_KVM_DEV=self.kvm, NCM_BOOT_ID_FILE=self.boot_id,
                   NCM_ACCEL_CACHE=self.cache, NCM_ACCEL_PROBE_S="2",
                   NCM_SYS_MODULE_DIR=self.modules)
        env.pop("REPLAY", None)
        env.update(extra)
        t0 = time.monotonic()
        p = subprocess.run(["bash", "-c", DRIVER, "driver", TOP], env=env,
                           capture_output=True, text=True, timeout=60)
        res = {"rc": p.returncode, "out": p.stdout + p.stderr,
               "secs": time.monotonic() - t0}
        for line in p.stdout.splitlines():
            if line.startswith("ACCEL_RESULT="):
                res["accel"] = line.split("=", 1)[1]
            if line.startswith("ACCEL_WHY="):
                res["why"] = line.split("=", 1)[1]
        return res

    def test_auto_takes_kvm_when_probe_reaches_init(self):
        r = self.pick("auto", "works")
        self.assertEqual(r.get("accel"), "kvm", r["out"])
        self.assertEqual(self.boots(), 1)

    def test_auto_hang_falls_back_to_tcg_within_bound(self):
        r = self.pick("auto", "hang")
        self.assertEqual(r.get("accel"), "tcg", r["out"])
        self.assertIn("did not reach /init in 2 s", r["why"])
        self.assertIn("Probing EDD", r["why"])
        self.assertLess(r["secs"], 10)

    def test_auto_qemu_error_falls_back_with_message(self):
        r = self.pick("auto", "fail")
        self.assertEqual(r.get("accel"), "tcg", r["out"])
        self.assertIn("failed to set MSR", r["why"])

    def test_verdict_cached_for_this_boot_only(self):
        self.pick("auto", "hang")
        self.assertEqual(self.boots(), 1)
        # same boot: no second probe, even though KVM would work now
        r = self.pick("auto", "works")
        self.assertEqual(r.get("accel"), "tcg", r["out"])
        self.assertEqual(self.boots(), 1)
        # after a reboot the machine is probed again
        self.set_boot("22222222-bbbb")
        r = self.pick("auto", "works")
        self.assertEqual(r.get("accel"), "kvm", r["out"])
        self.assertEqual(self.boots(), 2)

    def test_kvm_fails_fast_with_reason(self):
        r = self.pick("kvm", "hang")
        self.assertNotEqual(r["rc"], 0)
        self.assertIn("ACCEL=kvm: KVM does not work here", r["out"])
        self.assertNotIn("ACCEL_RESULT", r["out"])
        # the second time from the cache: no boot, at once
        r = self.pick("kvm", "hang")
        self.assertNotEqual(r["rc"], 0)
        self.assertEqual(self.boots(), 1)
        self.assertLess(r["secs"], 5)

    def test_kvm_works(self):
        r = self.pick("kvm", "works")
        self.assertEqual((r["rc"], r.get("accel")), (0, "kvm"), r["out"])

    def test_tcg_never_probes(self):
        r = self.pick("tcg", "works")
        self.assertEqual(r.get("accel"), "tcg", r["out"])
        self.assertEqual(self.boots(), 0)

    def test_no_kvm_in_binary_or_no_device(self):
        r = self.pick("auto", "works", built=False)
        self.assertEqual(r.get("accel"), "tcg", r["out"])
        self.assertIn("built without KVM", r["why"])
        os.unlink(self.kvm)
        r = self.pick("auto", "works")
        self.assertEqual(r.get("accel"), "tcg", r["out"])
        self.assertIn("does not exist", r["why"])
        self.assertEqual(self.boots(), 0)
        # not cached: once /dev/kvm is there, KVM is taken
        open(self.kvm, "w").close()
        r = self.pick("auto", "works")
        self.assertEqual(r.get("accel"), "kvm", r["out"])

    PVM_WHY = "is a paravirtual KVM (module kvm_pvm"

    def test_pvm_auto_takes_tcg_at_once(self):
        self.set_modules("kvm", "kvm_pvm")
        r = self.pick("auto", "hang", NCM_ACCEL_PROBE_S="20")
        self.assertEqual(r.get("accel"), "tcg", r["out"])
        self.assertEqual(r["why"], "ACCEL=auto: TCG, because " + self.kvm +
                         " " + self.PVM_WHY + ", no kvm_intel or kvm_amd),"
                         " which hangs ordinary guest kernels")
        self.assertEqual(self.boots(), 0)
        self.assertLess(r["secs"], 2)
        # a blocker, not a verdict: nothing cached, so that once the
        # machine has a hardware KVM it is probed
        self.assertFalse(os.path.exists(self.cache))
        self.set_modules("kvm", "kvm_intel")
        r = self.pick("auto", "works")
        self.assertEqual(r.get("accel"), "kvm", r["out"])
        self.assertEqual(self.boots(), 1)

    def test_pvm_kvm_refused_with_the_same_reason(self):
        self.set_modules("kvm", "kvm_pvm")
        auto = self.pick("auto", "works")
        reason = auto["why"].split("because ", 1)[1]
        r = self.pick("kvm", "works", NCM_ACCEL_PROBE_S="20")
        self.assertNotEqual(r["rc"], 0)
        self.assertNotIn("ACCEL_RESULT", r["out"])
        self.assertIn("ACCEL=kvm: KVM does not work here: " + reason,
                      r["out"])
        self.assertEqual(self.boots(), 0)
        self.assertLess(r["secs"], 2)

    def test_hardware_kvm_still_probed(self):
        for vendor in ("kvm_intel", "kvm_amd"):
            self.set_modules("kvm", vendor)
            os.path.exists(self.cache) and os.unlink(self.cache)
            n = self.boots()
            r = self.pick("auto", "hang")
            self.assertEqual(r.get("accel"), "tcg", r["out"])
            self.assertIn("did not reach /init in 2 s", r["why"])
            self.assertEqual(self.boots(), n + 1)
        # kvm_pvm beside a vendor module: which one /dev/kvm is cannot be
        # told from /sys/module, so the probe decides
        self.set_modules("kvm", "kvm_pvm", "kvm_intel")
        os.unlink(self.cache)
        r = self.pick("auto", "works")
        self.assertEqual(r.get("accel"), "kvm", r["out"])
        self.assertEqual(self.boots(), 3)
        # no module directory at all (another architecture, a built-in
        # KVM without parameters): probed as before
        self.set_modules()
        os.unlink(self.cache)
        r = self.pick("auto", "works")
        self.assertEqual(r.get("accel"), "kvm", r["out"])
        self.assertEqual(self.boots(), 4)

    def test_replay_needs_tcg(self):
        r = self.pick("auto", "works", REPLAY="record")
        self.assertEqual(r.get("accel"), "tcg", r["out"])
        self.assertEqual(self.boots(), 0)
        r = self.pick("kvm", "works", REPLAY="record")
        self.assertNotEqual(r["rc"], 0)

    def test_unknown_accel_refused(self):
        r = self.pick("hvf")
        self.assertNotEqual(r["rc"], 0)
        self.assertIn("unknown accelerator", r["out"])


if __name__ == "__main__":
    unittest.main()
