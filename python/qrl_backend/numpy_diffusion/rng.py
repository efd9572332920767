"""qrl-sim's named random streams, written from their definition: a stream is Alea (Baagøe's
generator, as seedrandom 3.0.5 ships it) seeded by its path string, and `fork(name)` is the stream
of `path + "/" + name` (docs/adapter.md: a generate request's `seed` is such a path). Draws: uniform()
= Alea's 53-bit double, uniform_open() redraws 0, uint32(), int(n) by rejection, normal() by Box–Muller,
shuffle by Fisher–Yates from the top. Pure Python floats: the JavaScript arithmetic is IEEE double too."""

from __future__ import annotations

import math
from typing import List


def _mash_factory():
    n = [0xEFC8249D]

    def mash(data: str) -> float:
        x = n[0]
        for ch in data.encode("utf-16-le").decode("utf-16-le"):
            for unit in _utf16_units(ch):
                x += unit
                h = 0.02519603282416938 * x
                x = int(h) % 4294967296  # h >>> 0 (h ≥ 0)
                h -= x
                h *= x
                x = int(h) % 4294967296
                h -= x
                x += h * 4294967296.0
        n[0] = x
        return (int(x) % 4294967296) * 2.3283064365386963e-10

    return mash


def _utf16_units(ch: str):
    cp = ord(ch)
    if cp < 0x10000:
        return (cp,)
    cp -= 0x10000
    return (0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF))


class Rng:
    """One named stream (the TypeScript `Rng`): `Rng("42/step-3/rollout").fork("row-5")`."""

    def __init__(self, path: str):
        self.path = path
        mash = _mash_factory()
        self.c = 1
        s0, s1, s2 = mash(" "), mash(" "), mash(" ")
        s0 -= mash(path)
        if s0 < 0:
            s0 += 1
        s1 -= mash(path)
        if s1 < 0:
            s1 += 1
        s2 -= mash(path)
        if s2 < 0:
            s2 += 1
        self.s0, self.s1, self.s2 = s0, s1, s2

    def _next(self) -> float:
        t = 2091639 * self.s0 + self.c * 2.3283064365386963e-10
        self.s0 = self.s1
        self.s1 = self.s2
        self.c = int(t)  # t | 0 (0 ≤ t < 2^31)
        self.s2 = t - self.c
        return self.s2

    def fork(self, name: str) -> "Rng":
        if not name:
            raise ValueError("rng.fork: name must be a non-empty string")
        return Rng(f"{self.path}/{name}")

    def uniform(self) -> float:
        a = self._next()
        return a + int(self._next() * 0x200000) * 1.1102230246251565e-16

    def uniform_open(self) -> float:
        while True:
            u = self.uniform()
            if u > 0:
                return u

    def uint32(self) -> int:
        return int(self._next() * 4294967296.0) % 4294967296

    def int(self, n: int) -> int:
        limit = 2**32 - (2**32 % n)
        while True:
            x = self.uint32()
            if x < limit:
                return x % n

    def normal(self) -> float:
        u1 = self.uniform_open()
        u2 = self.uniform()
        return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)

    def shuffle(self, items: List[int]) -> List[int]:
        for i in range(len(items) - 1, 0, -1):
            j = self.int(i + 1)
            items[i], items[j] = items[j], items[i]
        return items
