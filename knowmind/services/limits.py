"""Per-token request rates, and a lockout for invalid tokens that cannot be turned against users.

Invalid tokens are counted per client address, per token prefix (the tenant a tenant token names:
what a guesser aims at) and per (address, prefix) pair. A lock never refuses a valid token because
its address was noisy: a token is looked up (one indexed lookup) and admitted when valid; the
locks decide how an *invalid* one is answered (429 with Retry-After instead of 401), and refuse a
token before its lookup only where it names a locked prefix and comes from an address that failed
against that prefix within the window: a guesser's tries stay bounded per address and per prefix
(see ``Lockout``).

In-process state: with several server processes each enforces its own share (a shared store is
a deployment concern, see issue 15). Keys are token ids, addresses and tenant ids, never tokens.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["AuthFailures", "Lockout", "LockoutPolicy", "RequestLimits", "TokenBuckets"]

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


@dataclass(frozen=True, slots=True)
class LockoutPolicy:
    """``threshold`` invalid tokens within ``window_s`` lock out for ``lockout_s``, doubling with
    each further lockout up to ``max_lockout_s`` (a threshold of 0: never)."""

    threshold: int
    window_s: float = 60.0
    lockout_s: float = 30.0
    max_lockout_s: float = 900.0
    clock: Callable[[], float] = time.monotonic


class AuthFailures:
    """The ``policy`` applied to each key (an address, a token prefix) on its own."""

    def __init__(self, policy: LockoutPolicy) -> None:
        self.policy, self.clock = policy, policy.clock
        self._by_key: OrderedDict[str, _Failures] = OrderedDict()

    def locked_for(self, key: str) -> float:
        """Seconds the key stays locked (0: not locked)."""
        entry = self._by_key.get(key)
        return max(0.0, entry.locked_until - self.clock()) if entry else 0.0

    def failed(self, key: str) -> None:
        policy = self.policy
        if policy.threshold <= 0:
            return
        now = self.clock()
        entry = self._by_key.pop(key, None)
        if entry is None:
            entry = _Failures(0, now)
        elif now - entry.first_at > policy.window_s:  # a new window; a lock in force stays
            entry = _Failures(0, now, entry.strikes, entry.locked_until)
        entry.count += 1
        if entry.count >= policy.threshold:
            lockout = min(policy.max_lockout_s, policy.lockout_s * 2**entry.strikes)
            entry.locked_until, entry.strikes = now + lockout, entry.strikes + 1
            entry.count, entry.first_at = 0, now
        self._by_key[key] = entry
        if len(self._by_key) > MAX_KEYS:
            self._by_key.popitem(last=False)


class Lockout:
    """Invalid tokens counted per address, per prefix and per (address, prefix).

    - ``before_lookup(address, prefix)``: seconds to refuse a token before it is looked up; only
      while ``prefix`` is locked *and* this address failed against it within ``window_s``. A
      guesser gets ``threshold`` tries at a tenant's tokens, then one per window per address while
      the tenant stays locked; a valid token is refused here only when its own address has been
      guessing at its own tenant (a shared address whose neighbour does). Other tenants' tokens
      and the admin token (no prefix) are never refused here, whatever the address sent.
    - ``failed(address, prefix)``: counts an invalid token; returns the seconds the caller is to
      wait (answered 429) when the address or the prefix was locked already, else 0 (401).
    """

    def __init__(self, policy: LockoutPolicy) -> None:
        self.policy, self.clock = policy, policy.clock
        self.addresses = AuthFailures(policy)
        self.prefixes = AuthFailures(policy)
        self._pairs: OrderedDict[tuple[str, str], float] = OrderedDict()  # last failure at

    def before_lookup(self, address: str, prefix: str | None) -> float:
        if prefix is None or self.policy.threshold <= 0:
            return 0.0
        locked = self.prefixes.locked_for(prefix)
        last = self._pairs.get((address, prefix))
        if not locked or last is None:
            return 0.0
        recent = self.policy.window_s - (self.clock() - last)
        return min(locked, recent) if recent > 0 else 0.0

    def failed(self, address: str, prefix: str | None) -> float:
        if self.policy.threshold <= 0:
            return 0.0
        was_locked = self._locked_for(address, prefix) > 0
        self.addresses.failed(address)
        if prefix is not None:
            self.prefixes.failed(prefix)
            self._pairs.pop((address, prefix), None)
            self._pairs[(address, prefix)] = self.clock()
            if len(self._pairs) > MAX_KEYS:
                self._pairs.popitem(last=False)
        return self._locked_for(address, prefix) if was_locked else 0.0

    def _locked_for(self, address: str, prefix: str | None) -> float:
        by_prefix = self.prefixes.locked_for(prefix) if prefix is not None else 0.0
        return max(self.addresses.locked_for(address), by_prefix)


@dataclass(frozen=True, slots=True)
class RequestLimits:
    requests: TokenBuckets
    lockout: Lockout

    @classmethod
    def of(cls, rate: float, burst: int, auth_failures: int) -> RequestLimits:
        return cls(TokenBuckets(rate, burst), Lockout(LockoutPolicy(auth_failures)))
