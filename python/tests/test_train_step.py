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


class SeqsTest(unittest.TestCase):
    def test_batches_take_the_lengths_in_turn(self):
        """--seqs: step i's batch has the (i mod n)th length, the same
        stream in every mode (the seed), and --seq alone keeps one."""
        ts = load()
        cfg = ts.make_config("gpt2", "tiny")
        data = ts.batches(cfg, 5, 2, 16, "cpu", seqs=[4, 8])
        self.assertEqual([tuple(x.shape) for x, _ in data], [(2, 4), (2, 8), (2, 4), (2, 8), (2, 4)])
        x, y = data[1]
        self.assertEqual(y.shape, x.shape)
        again = ts.batches(cfg, 5, 2, 16, "cpu", seqs=[4, 8])
        self.assertTrue(all((a == b).all() for (a, _), (b, _) in zip(data, again)))
        self.assertEqual({tuple(x.shape) for x, _ in ts.batches(cfg, 3, 2, 16, "cpu")}, {(2, 16)})

    def test_seqs_with_prepare_is_refused(self):
        ts = load()
        with contextlib.redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit) as ex:
            ts.main(["--prepare", "--seqs", "4,8"])
        self.assertEqual(ex.exception.code, 2)
        self.assertIn("--seqs", err.getvalue())


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
