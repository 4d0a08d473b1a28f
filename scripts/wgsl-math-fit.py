"""
Derives the constants of Kiln's float32 WGSL math library (src/kernels/math/wgsl-libm/): the
minimax polynomial coefficients and the split constants (pi/2 in pieces for Cody-Waite reduction,
ln 2 and log10(2) in two parts, the bits of 2/pi for Payne-Hanek reduction), printed as WGSL
hexadecimal f32 literals, which are exact (a decimal literal is rounded to f32 in a way WGSL
leaves to the implementation).

Polynomials are fitted with Lawson's algorithm (iteratively reweighted least squares, which
converges to the minimax fit of a linear approximation) on 4000 Chebyshev nodes, weighting the
error relative to the function the polynomial serves (sin, not the sin(x)/x - 1 it fits), in
float64 on mpmath references, then rounded to float32. The printed log2 of the largest weighted
error is before that rounding; the library's test (test/webgpu-math.test.ts) measures the whole
functions in float32 on a real adapter against float64 references.

Run: python3 scripts/wgsl-math-fit.py   (numpy, mpmath)
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 100  # 2/pi needs 216 bits


def fit(f, degree, lo, hi, weight, n=4000, iters=300):
    x = np.array([(lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / n) for k in range(n)])
    y = np.array([float(f(mp.mpf(v))) for v in x])
    w0 = np.array([weight(v) for v in x])
    a = np.stack([x**p for p in range(degree + 1)], 1)
    u = np.ones(n) / n
    for _ in range(iters):
        w = np.sqrt(u) * w0
        c, *_ = np.linalg.lstsq(a * w[:, None], y * w, rcond=None)
        e = np.abs(a @ c - y) * w0
        u = u * e
        u /= u.sum()
    return c, float(np.log2((np.abs(a @ c - y) * w0).max()))


def hexf(v):
    """float32 value v as an exact WGSL hex literal."""
    v = float(np.float32(v))
    if v == 0:
        return '0.0f'
    m, e = mp.frexp(mp.mpf(v))  # v = m 2^e, 0.5 <= |m| < 1
    m, e = m * 2, e - 1
    frac = int(mp.nint((abs(m) - 1) * 2**24))  # 24 fraction bits (23 needed, multiple of 4 for hex)
    digits = f'{frac:06x}'.rstrip('0') or '0'
    return f"{'-' if v < 0 else ''}0x1.{digits}p{e}f"


def pieces(value, bits):
    """value as float32 pieces with the given numbers of significant bits (the last: the rest)."""
    out, rest = [], mp.mpf(value)
    for nb in bits:
        e = int(mp.floor(mp.log(abs(rest), 2)))
        q = mp.mpf(2) ** (e - nb + 1)
        c = mp.nint(rest / q) * q
        out.append(c)
        rest -= c
    return out, rest


def show(name, coeffs, err=None):
    tail = f'  // fit error 2^{err:.1f}' if err is not None else ''
    print(f'{name}: {", ".join(hexf(c) for c in coeffs)}{tail}')


S = np.sqrt
R_MAX = 0.8  # |r| after reduction by pi/2: pi/4 plus the slack of a rounded quotient
c, e = fit(lambda z: (mp.sin(mp.sqrt(z)) - mp.sqrt(z)) / mp.sqrt(z) ** 3 if z > 0 else mp.mpf(-1) / 6, 2, 1e-12, R_MAX**2, lambda z: S(z) ** 3 / np.sin(S(z)))
show('sin (x + x z P(z))', c, e)
c, e = fit(lambda z: (mp.cos(mp.sqrt(z)) - 1 + z / 2) / z**2 if z > 0 else mp.mpf(1) / 24, 2, 1e-12, R_MAX**2, lambda z: z**2 / np.cos(S(z)))
show('cos (1 - z/2 + z^2 P(z))', c, e)
c, e = fit(lambda z: (mp.tan(mp.sqrt(z)) - mp.sqrt(z)) / mp.sqrt(z) ** 3 if z > 0 else mp.mpf(1) / 3, 5, 1e-12, R_MAX**2, lambda z: S(z) ** 3 / np.tan(S(z)))
show('tan (x + x z P(z))', c, e)
p, rest = pieces(mp.pi / 2, [7] * 6 + [24])
show('pi/2 pieces (6 x 7 bits, 24 bits)', p)
print(f'  pi/2 rest 2^{float(mp.log(abs(rest), 2)):.1f}')
g = int(mp.floor(2 / mp.pi * mp.mpf(2) ** 216))
print('2/pi bits after 8 zero bits (7 words):', ', '.join(f'0x{(g >> (32 * (6 - j))) & 0xFFFFFFFF:08x}u' for j in range(7)))
show('pi/2 hi, lo', pieces(mp.pi / 2, [24, 24])[0])
show('pi hi, lo', pieces(mp.pi, [24, 24])[0])

L2 = float(mp.log(2)) / 2 * 1.002  # |r| after reduction by ln 2
c, e = fit(lambda r: (mp.expm1(r) - r) / r**2 if r != 0 else mp.mpf(0.5), 4, -L2, L2, lambda r: r * r / abs(np.expm1(r)) if r != 0 else 0)
show('expm1 (r + r^2 P(r))', c, e)
show('ln2 (16 bits, rest)', pieces(mp.log(2), [16, 24])[0])
show('log10(2) (16 bits, rest)', pieces(mp.log10(2), [16, 24])[0])
show('log2(e), log10(e)', [1 / mp.log(2), 1 / mp.log(10)])
smax = (S(2) - 1) / (S(2) + 1) * 1.001
c, e = fit(lambda z: (2 * mp.atanh(mp.sqrt(z)) / mp.sqrt(z) - 2) / z if z > 0 else mp.mpf(2) / 3, 2, 1e-14, smax**2, lambda z: S(z) * z / (2 * np.arctanh(S(z))))
show('log R(z) = z P(z), z = s^2, s = f / (2 + f)', c, e)

c, e = fit(lambda z: (mp.tanh(mp.sqrt(z)) - mp.sqrt(z)) / mp.sqrt(z) ** 3 if z > 0 else -mp.mpf(1) / 3, 4, 1e-14, 0.55**2, lambda z: S(z) ** 3 / np.tanh(S(z)))
show('tanh on [0, 0.55] (x + x z P(z))', c, e)
t8 = float(mp.tan(mp.pi / 8)) * 1.001
c, e = fit(lambda z: (mp.atan(mp.sqrt(z)) - mp.sqrt(z)) / mp.sqrt(z) ** 3 if z > 0 else -mp.mpf(1) / 3, 4, 1e-14, t8**2, lambda z: S(z) ** 3 / np.arctan(S(z)))
show('atan on [0, tan(pi/8)] (x + x z P(z))', c, e)
c, e = fit(lambda z: mp.erf(mp.sqrt(z)) / mp.sqrt(z) if z > 0 else 2 / mp.sqrt(mp.pi), 6, 1e-14, 0.875**2, lambda z: S(z) / float(mp.erf(mp.sqrt(z))) if z > 0 else 1)
show('erf on [0, 0.875] (x P(z))', c, e)
K, A0, A1 = 2.5, 0.875, 10.1


def erfc_scaled(t):
    a = K * (1 + t) / (1 - t)
    return mp.erfc(a) * mp.exp(a * a) * (a + K)


c, e = fit(erfc_scaled, 8, (A0 - K) / (A0 + K), (A1 - K) / (A1 + K), lambda t: 1 / float(erfc_scaled(mp.mpf(t))))
show('erfc(a) e^(a^2) (a + 2.5) on [0.875, 10.1] in t = (a - 2.5) / (a + 2.5)', c, e)
