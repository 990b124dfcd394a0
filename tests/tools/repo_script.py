# SPDX-License-Identifier: GPL-2.0-or-later
#
# For the tests in this directory: the repository's top, and one of its
# scripts (a file name with dashes, so no plain import) loaded as a module.
import importlib.util
import os

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def load(name, *path):
    """the script at TOP/@path... as module @name"""
    spec = importlib.util.spec_from_file_location(name,
                                                  os.path.join(TOP, *path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
