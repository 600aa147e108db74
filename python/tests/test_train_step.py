#!/usr/bin/env python3
"""examples/models/train_step.py's process isolation: a child gets every
flag of the parent's command line but those it sets per child (the sixteenth
and seventeenth sessions' --cudnn-sdp runs lost the flag in the children,
so their modes ran with cuDNN's attention off). No torch needed."""
import contextlib
import importlib.util
import io
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "..", "..", "examples", "models", "train_step.py")


def load():
    try:
        import torch  # noqa: F401  (train_step imports torch at the top)
    except ImportError:
        print("test_train_step: no torch; skipped")
        sys.exit(77)
    sys.path.insert(0, os.path.dirname(PATH))
    spec = importlib.util.spec_from_file_location("train_step", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class ChildArgvTest(unittest.TestCase):
    def test_flags_pass_to_children(self):
        ts = load()
        argv = ["--models", "gpt2,llama", "--cudnn-sdp", "--modes=fusec,default", "--steps", "20", "--out", "r.json",
                "--isolate", "model", "--max-autotune", "--profile-modes", "fusec"]
        self.assertEqual(ts.child_argv(argv), ["--cudnn-sdp", "--steps", "20", "--profile-modes", "fusec"])

    def test_every_flag_is_passed_or_set_per_child(self):
        """A flag added to the parser later is passed through unless it is
        named in _PER_CHILD: each option string either survives or is set."""
        ts = load()
        import argparse
        seen = []
        real = argparse.ArgumentParser.add_argument

        def spy(self, *names, **kw):
            seen.extend(n for n in names if n.startswith("--"))
            return real(self, *names, **kw)

        argparse.ArgumentParser.add_argument = spy
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                try:
                    ts.main(["--help"])
                except SystemExit:
                    pass
        finally:
            argparse.ArgumentParser.add_argument = real
        self.assertIn("--cudnn-sdp", seen)
        for flag in seen:
            if flag in ts._PER_CHILD or flag == "--help":
                continue
            self.assertEqual(ts.child_argv([flag, "1"]), [flag, "1"], flag)


if __name__ == "__main__":
    unittest.main()
