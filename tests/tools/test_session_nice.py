#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# SESSION_KEEPS_NICE (scripts/setup/common.sh), with which fuzz-campaign.sh
# starts each target in a session of its own: the session's scheduler
# autogroup must take the caller's nice value, or a campaign at nice 19
# competes with other shells' work as if at nice 0.
import os
import subprocess
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

DRIVER = r"""
. "$1/scripts/setup/common.sh"
setsid bash -c "$SESSION_KEEPS_NICE" bash cat /proc/self/autogroup
"""


@unittest.skipUnless(os.path.exists('/proc/self/autogroup'),
                     'no scheduler autogroups on this kernel')
class SessionNiceTest(unittest.TestCase):
    def autogroup(self, niceness):
        out = subprocess.run(['nice', '-n', str(niceness), 'bash', '-c',
                              DRIVER, 'driver', TOP],
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def test_takes_the_callers_nice(self):
        self.assertRegex(self.autogroup(19), r'^/autogroup-\d+ nice 19$')

    def test_a_session_of_its_own(self):
        # A process that never left the kernel's default autogroup (one a
        # service started without a session, as CI's runner is) reads an
        # empty file: the default autogroup is the root task group itself.
        mine = open('/proc/self/autogroup').read().split() or ['root']
        theirs = self.autogroup(7)
        self.assertRegex(theirs, r'^/autogroup-\d+ nice 7$')
        self.assertNotEqual(theirs.split()[0], mine[0])


if __name__ == '__main__':
    unittest.main()
