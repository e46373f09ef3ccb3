#!/usr/bin/env python3
"""Prints the sin and cos pins of tests/kernels/test_libm.c: the correctly
rounded sin and cos of fixed arguments, from mpmath at 90 digits
(independent of ovt's code, of MPFR and of any libm), each checked to lie at
least 0.01 ulp from a midpoint so the 90-digit value rounds as the exact one
does; and the FNV-1a hash of the correctly rounded sin and cos of every
rotary embedding angle pos * f_i, pos < 4096, f_i = float32(10000^(-i/32)),
i < 32 (pos-major, sin then cos), as test_libm's test_trig_rope computes it.
  python3 scripts/libm_trig_pins.py"""
import math
import struct
from fractions import Fraction as F

import mpmath

mpmath.mp.dps = 90


def cr(v, margin=F(1, 100)):
    """v rounded to a double, v at least `margin` ulp from a midpoint."""
    f = float(v)  # mpmath rounds to nearest
    u = math.ulp(f) if f != 0 else 5e-324
    exact = F(int(mpmath.floor(v * mpmath.mpf(2) ** 1400)), 2 ** 1400)
    assert f == 0 or abs(exact - F(f)) / F(u) < F(1, 2) - margin, (v, f)
    return f


h_ = float.fromhex
XS = [1.0, 0.5, -2.25, 2.0 ** -20, 1e-3, h_('0x1.921fb54442d18p+0'), h_('0x1.921fb54442d18p+1'),
      h_('0x1.6c6cbc45dc8dep+5'), 65535.0, 4095 * h_('0x1.ef0d58p-3'), 2.0 ** 20, -(2.0 ** 20), 100.0,
      1e5, h_('0x1.921fb54442d18p-1'), h_('0x1.2d97c7f3321d2p+1'), -1e-300]
for x in XS:
    for name, fn in (("F_SIN", mpmath.sin), ("F_COS", mpmath.cos)):
        print(f"    {{{name}, {x.hex()}, 0.0, {cr(fn(mpmath.mpf(x))).hex()}}},")


def f32(d):
    return struct.unpack('f', struct.pack('f', d))[0]


def fnv(h, d):
    b = struct.unpack('<Q', struct.pack('<d', d))[0]
    for i in range(8):
        h ^= (b >> (8 * i)) & 0xff
        h = (h * 0x100000001b3) % 2 ** 64
    return h


mpmath.mp.dps = 45
fs = [f32(float(mpmath.power(10000, -mpmath.mpf(i) / 32))) for i in range(32)]  # as krn_pow rounds
h = 0xcbf29ce484222325
for pos in range(4096):
    for f in fs:
        x = mpmath.mpf(pos * f)  # exact: 12 bits times 24
        h = fnv(h, cr(mpmath.sin(x), F(1, 2 ** 40)))  # 45 digits: 2^-149
        h = fnv(h, cr(mpmath.cos(x), F(1, 2 ** 40)))
print(f"rope hash 0x{h:016x}")
