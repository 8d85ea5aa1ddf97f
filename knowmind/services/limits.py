"""Per-token request rates and a lockout for addresses that keep presenting invalid tokens.

In-process state: with several server processes each enforces its own share (a shared store is
a deployment concern, see issue 15). Keys are token ids and client addresses, never tokens.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["AuthFailures", "RequestLimits", "TokenBuckets"]

# entries kept per table (least recently seen dropped first): bounded memory under a flood
MAX_KEYS = 100_000


class TokenBuckets:
    """A token bucket per key: ``burst`` requests at once, refilled at ``rate`` per second."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at

    def take(self, key: str) -> float:
        """0 when the request may proceed (one token taken), else seconds until it could."""
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        tokens, at = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        wait = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
        self._buckets[key] = (tokens - 1 if wait == 0 else tokens, now)
        if len(self._buckets) > MAX_KEYS:
            self._buckets.popitem(last=False)
        return wait


@dataclass(slots=True)
class _Failures:
    count: int
    first_at: float
    strikes: int = 0  # lockouts so far: each doubles the next
    locked_until: float = 0.0


class AuthFailures:
    """``threshold`` invalid tokens from one address within ``window_s`` lock it out for
    ``lockout_s``, doubling with each further lockout up to ``max_lockout_s``."""

    def __init__(
        self,
        threshold: int,
        window_s: float = 60.0,
        lockout_s: float = 30.0,
        max_lockout_s: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold, self.window_s = threshold, window_s
        self.lockout_s, self.max_lockout_s, self.clock = lockout_s, max_lockout_s, clock
        self._by_address: OrderedDict[str, _Failures] = OrderedDict()

    def locked_for(self, address: str) -> float:
        """Seconds the address stays locked out (0: it may try)."""
        entry = self._by_address.get(address)
        return max(0.0, entry.locked_until - self.clock()) if entry else 0.0

    def failed(self, address: str) -> None:
        if self.threshold <= 0:
            return
        now = self.clock()
        entry = self._by_address.pop(address, None)
        if entry is None or now - entry.first_at > self.window_s:
            entry = _Failures(0, now, entry.strikes if entry else 0)
        entry.count += 1
        if entry.count >= self.threshold:
            lockout = min(self.max_lockout_s, self.lockout_s * 2**entry.strikes)
            entry.locked_until, entry.strikes = now + lockout, entry.strikes + 1
            entry.count, entry.first_at = 0, now
        self._by_address[address] = entry
        if len(self._by_address) > MAX_KEYS:
            self._by_address.popitem(last=False)


@dataclass(frozen=True, slots=True)
class RequestLimits:
    requests: TokenBuckets
    auth_failures: AuthFailures

    @classmethod
    def of(cls, rate: float, burst: int, auth_failures: int) -> RequestLimits:
        return cls(TokenBuckets(rate, burst), AuthFailures(auth_failures))
