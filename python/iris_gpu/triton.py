"""Device helpers for Triton kernels over the iris symmetric heap: the Python twin of
iris_device.h (needs triton; the rest of iris_gpu does not).

A heap tensor has the same offset on every rank, and every rank's heap is mapped into this
process, so a pointer into this rank's heap becomes the same element on rank `to` by
moving it from this rank's heap base to rank `to`'s. Kernels take the bases as an int64
tensor (Context.heap_bases_tensor(): rank r's base at index r) plus this rank's number.

    import iris_gpu.triton as ig
    @triton.jit
    def k(x, flags, bases, me, peer, epoch, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        ig.store(x + offs, tl.load(x + offs), me, peer, bases)   # into peer's copy of x
        ig.signal(flags, epoch, me, peer, bases)                 # release, system scope
        ig.wait(flags, epoch)                                    # acquire, system scope

Ordering (as in iris_device.h): signal() makes the whole program's earlier writes visible
to whoever acquires the flag: a CTA barrier (tl.debug_barrier), then one release store
at system scope. wait() spins with acquire loads at system scope until the flag reaches
the value (wrap-safe: flag - value >= 0 as int32, so epochs count up and are never reset)
or max_spins loads have been made; it returns the last value read (the caller can tell a
timeout: flag - value < 0). Flags are int32 heap elements. Remote loads and stores are
plain (weak) accesses: order them with signal/wait or a barrier.
"""
import triton
import triton.language as tl


@triton.jit
def translate(ptr, from_rank, to_rank, heap_bases):
    """ptr (into from_rank's heap, as mapped here) moved to to_rank's copy."""
    from_base = tl.load(heap_bases + from_rank)
    to_base = tl.load(heap_bases + to_rank)
    offset = tl.cast(ptr, tl.int64) - from_base
    to_bytes = tl.cast(to_base, tl.pointer_type(tl.int8))
    return tl.cast(to_bytes + offset, ptr.dtype)


@triton.jit
def load(ptr, me, peer, heap_bases, mask=None, other=None):
    """Load ptr's elements from rank peer's copy."""
    return tl.load(translate(ptr, me, peer, heap_bases), mask=mask, other=other)


@triton.jit
def store(ptr, value, me, peer, heap_bases, mask=None):
    """Store value into rank peer's copy of ptr."""
    tl.store(translate(ptr, me, peer, heap_bases), value, mask=mask)


# Memory orders and scopes of atomic_add, as constexpr numbers: Triton (3.6) passes no
# strings into a @triton.jit helper, so ig.atomic_add(..., sem=ig.ACQ_REL, scope=ig.GPU).
RELAXED = tl.constexpr(0)
ACQUIRE = tl.constexpr(1)
RELEASE = tl.constexpr(2)
ACQ_REL = tl.constexpr(3)
SYS = tl.constexpr(0)
GPU = tl.constexpr(1)
CTA = tl.constexpr(2)


@triton.jit
def _atomic_add_at(ptr, value, mask, sem: tl.constexpr, scope: tl.constexpr):
    if scope == 0:
        if sem == 0:
            old = tl.atomic_add(ptr, value, mask=mask, sem="relaxed", scope="sys")
        elif sem == 1:
            old = tl.atomic_add(ptr, value, mask=mask, sem="acquire", scope="sys")
        elif sem == 2:
            old = tl.atomic_add(ptr, value, mask=mask, sem="release", scope="sys")
        else:
            old = tl.atomic_add(ptr, value, mask=mask, sem="acq_rel", scope="sys")
    elif scope == 1:
        if sem == 0:
            old = tl.atomic_add(ptr, value, mask=mask, sem="relaxed", scope="gpu")
        elif sem == 1:
            old = tl.atomic_add(ptr, value, mask=mask, sem="acquire", scope="gpu")
        elif sem == 2:
            old = tl.atomic_add(ptr, value, mask=mask, sem="release", scope="gpu")
        else:
            old = tl.atomic_add(ptr, value, mask=mask, sem="acq_rel", scope="gpu")
    else:
        if sem == 0:
            old = tl.atomic_add(ptr, value, mask=mask, sem="relaxed", scope="cta")
        elif sem == 1:
            old = tl.atomic_add(ptr, value, mask=mask, sem="acquire", scope="cta")
        elif sem == 2:
            old = tl.atomic_add(ptr, value, mask=mask, sem="release", scope="cta")
        else:
            old = tl.atomic_add(ptr, value, mask=mask, sem="acq_rel", scope="cta")
    return old


@triton.jit
def atomic_add(ptr, value, me, peer, heap_bases, mask=None, sem: tl.constexpr = 0, scope: tl.constexpr = 0):
    """Atomically add value to rank peer's copy of ptr; returns the old values.
    sem: RELAXED (default), ACQUIRE, RELEASE, ACQ_REL; scope: SYS (default), GPU, CTA."""
    return _atomic_add_at(translate(ptr, me, peer, heap_bases), value, mask, sem, scope)


@triton.jit
def signal(flag, value, me, peer, heap_bases):
    """Set rank peer's copy of the int32 heap flag to value, releasing (system scope) every
    write this program made before."""
    tl.debug_barrier()
    tl.atomic_xchg(translate(flag, me, peer, heap_bases), value, sem="release", scope="sys")


@triton.jit
def wait(flag, value, max_spins: tl.constexpr = 1 << 30):
    """Spin on this rank's int32 flag until it reaches value (acquire, system scope; wrap-
    safe) or max_spins reads were made; returns the last value read."""
    # the comparison in int32, as the flag: a value of 2**31 or more reaches the kernel as
    # int64 (Triton types Python ints by size), and got - value in int64 is not wrap-safe
    target = tl.cast(value, tl.int32)
    got = tl.atomic_add(flag, 0, sem="acquire", scope="sys")
    spins = 1
    while ((got - target) < 0) & (spins < max_spins):
        got = tl.atomic_add(flag, 0, sem="acquire", scope="sys")
        spins += 1
    tl.debug_barrier()
    return got
