"""Compares raw float32 parameter dumps (--dump-params) of the same model.

usage: compare_params.py SAME_A SAME_B OTHER TOLERANCE LABEL [PAIR]
SAME_A and SAME_B (PAIR names them; "1 rank vs 2 ranks" by default) must agree within TOLERANCE (max |a-b| / (1+|a|)); OTHER, a run that must
differ, must not (so the comparison cannot pass blind)."""
import array
import sys


def load(path):
    a = array.array('f')
    a.frombytes(open(path, 'rb').read())
    return a


def rel_diff(a, b):
    return max(abs(x - y) / (1 + abs(x)) for x, y in zip(a, b))


a, b, other = (load(p) for p in sys.argv[1:4])
tol, label = float(sys.argv[4]), sys.argv[5]
pair = sys.argv[6] if len(sys.argv) > 6 else "1 rank vs 2 ranks"
assert len(a) == len(b) == len(other) and len(a) > 1000, "parameter dumps differ in size"
same, differ = rel_diff(a, b), rel_diff(a, other)
print(f"{pair}: max relative difference {same:.3g} (tolerance {tol:g}); vs {label}: {differ:.3g}")
assert same <= tol, f"{pair}: parameters differ beyond tolerance"
assert differ > 1e-3, f"{label} gave the same parameters: the comparison is blind"
