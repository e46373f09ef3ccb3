#!/usr/bin/env python3
"""Prints the pinned values of tests/kernels/test_libm.c: the correctly
rounded exp, log and pow of fixed arguments, from Python's decimal module at
90 digits (independent of ovt's code and of any libm), each checked to lie
at least 0.01 ulp from a midpoint so the 90-digit value rounds as the exact
one does.   python3 scripts/libm_pins.py"""
import math
from decimal import Decimal as D, getcontext
from fractions import Fraction as F

getcontext().prec = 90


def cr(d):
    f = float(d)  # correctly rounded, subnormals included
    u = math.ulp(f) if f != 0 else 5e-324
    assert f == 0 or abs(F(d) - F(f)) / F(u) < F(49, 100), (d, f)
    return f


EXP = [-0.5, -1.0, -2.5, -10.0, -20.125, -33.3, -87.3365, -700.0, -708.5, -740.0, -745.0, 1.0, 0.5,
       5.0, 100.0, 709.7, -3e-3, 1e-10, -1e-10, -0.693, -16.0 * 0.6931471805599453, 2.0 ** -30,
       -2.0 ** -30, 0.1, -0.1]
LOG = [2.0, 0.5, 3.0, 10.0, 1e-300, 5e-324, 2.2e-310, 1.5, 1 + 2.0 ** -30, 1 - 2.0 ** -30, 0.999,
       1e300, 50257.0, 12345.678, 1.7976931348623157e308, 0.7071, 1.4142, 1.01, 0.99, 7.0, 1234567.0]
POW = [(0.9, 1), (0.9, 2), (0.9, 10), (0.9, 1000), (0.9, 7000), (0.999, 1), (0.999, 3), (0.999, 1000),
       (0.999, 100000), (0.999, 700000), (0.95, 1), (0.95, 20), (0.99, 500), (0.98, 12345),
       (0.9999, 9999999), (0.5, 3.5), (2.0, 0.5), (10.0, -3.0), (1.0001, 1e6), (3.0, 0.3333)]

for x in EXP:
    print(f"    {{F_EXP, {x.hex()}, 0.0, {cr(D(x).exp()).hex()}}},")
for x in LOG:
    print(f"    {{F_LOG, {x.hex()}, 0.0, {cr(D(x).ln()).hex()}}},")
for x, y in POW:
    y = float(y)
    print(f"    {{F_POW, {x.hex()}, {y.hex()}, {cr((D(x).ln() * D(y)).exp()).hex()}}},")
