/* internal/coll/protocol.h: the collectives' protocol between GPUs: kinds of
 * collective, the device view of the collective state, call numbers and epochs, call
 * headers (signatures), the rank barrier, LL lines and the waits on them, and the
 * progress flags of the pipelined kernels. Device code (nvcc, hipcc).
 * Part of iris_collectives.h; not a public header. */
#ifndef IRIS_COLLECTIVES_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_collectives.h"
#endif
#ifndef IRIS_INTERNAL_COLL_PROTOCOL_H
#define IRIS_INTERNAL_COLL_PROTOCOL_H
#include "../core/layout.h"
#include "../device/platform.h"
#include "../device/debug.h"
#include "../device/wait.h"
#include "plan.h"

/* Kinds of collective: IRIS_COLL_AR ... IRIS_COLL_BC (internal/coll/plan.h). */
/* A flag OR'ed into the kind given to iris_coll_enqueue (multi-node compositions only):
 * a reduce-scatter whose recv sits at a heap offset that differs from rank to rank (the
 * composition's own part of a buffer). A reduce-scatter's peers never touch its recv (the
 * pull kernel and the LL path write only their own), so recv then enters the call's
 * signature as such, not by its offset. Single-node calls never set it. */
#define IRIS_COLL_OWN_RECV 0x100
/* Another such flag: the call's buffers enter the signature as off the heap, whatever
 * their addresses (iris_coll_opts_t.flags IRIS_COLL_STAGE: buffers whose heap offsets may
 * differ from rank to rank). Peers then never touch them: the latency paths only read
 * send and write recv locally, and the bandwidth path runs on the staging areas. */
#define IRIS_COLL_OFF_HEAP 0x200
/* And one for send alone (the fused all-reduce + RMSNorm's separate path, whose x is any
 * device memory and recv the staging area): send enters the signature as off the heap and
 * no peer reads it, wherever it lies, so ranks that place x differently still agree. */
#define IRIS_COLL_SEND_LOCAL 0x400
#define IRIS_COLL_KIND_FLAGS (IRIS_COLL_OWN_RECV | IRIS_COLL_OFF_HEAP | IRIS_COLL_SEND_LOCAL)

/* ---- The control block: one heap block per rank, at the same offset on every rank,
 * where the peers signal (calls, headers and barriers: "Calls and epochs" below;
 * progress: the progress flags at the end of this file). Zeroed at setup before the
 * ranks meet. Its layout is part of the protocol: pinned by the static_asserts. */
/* A row of the control block: one word per rank, from[p] written only by rank p. */
typedef struct iris_coll_row {
  unsigned long long from[IRIS_MAX_RANKS];
} iris_coll_row_t;
/* One parity's call headers: from[p] is what peer p announced last for a call of this
 * parity, IRIS_COLL_HDR_WORD(signature, call); 0 before any call. */
typedef iris_coll_row_t iris_coll_hdr_row_t;
typedef struct iris_coll_ctl {
  iris_coll_row_t flags[IRIS_COLL_MAX_CTAS];             /* [b].from[p]: barrier epoch that rank p's CTA b reached */
  iris_coll_row_t progress[IRIS_COLL_MAX_CTAS];          /* [b].from[p]: rank p's CTA b, iris_coll_progress_value(call, steps) */
  iris_coll_hdr_row_t hdr[2];                            /* [call & 1]: the peers' call headers */
  unsigned long long calls;                              /* the call word: (call number << 32) | CTAs of that call that have started */
  unsigned long long arm_dirty;                          /* bit p: the armed slots of parity p may hold a mismatched call's stores (iris_coll_arm_give_up) */
  unsigned char spare[256 - 2 * sizeof(unsigned long long)]; /* unused, to a 256-byte tail */
} iris_coll_ctl_t;
#define IRIS_COLL_CTL_ROWS_BYTES ((size_t)IRIS_COLL_MAX_CTAS * IRIS_MAX_RANKS * sizeof(unsigned long long))
static_assert(sizeof(iris_coll_row_t) == IRIS_MAX_RANKS * sizeof(unsigned long long), "a row is one word per rank");
static_assert(offsetof(iris_coll_ctl_t, flags) == 0 && offsetof(iris_coll_ctl_t, progress) == IRIS_COLL_CTL_ROWS_BYTES &&
                  offsetof(iris_coll_ctl_t, hdr) == 2 * IRIS_COLL_CTL_ROWS_BYTES &&
                  offsetof(iris_coll_ctl_t, calls) == 2 * IRIS_COLL_CTL_ROWS_BYTES + 2 * sizeof(iris_coll_hdr_row_t) &&
                  offsetof(iris_coll_ctl_t, arm_dirty) == offsetof(iris_coll_ctl_t, calls) + 8,
              "iris_coll_ctl_t: flags | progress | headers | call word | armed slots to re-arm");
static_assert(sizeof(iris_coll_ctl_t) == 2 * IRIS_COLL_CTL_ROWS_BYTES + 2 * sizeof(iris_coll_hdr_row_t) + 256, "iris_coll_ctl_t: a 256-byte tail");
static_assert(offsetof(iris_coll_ctl_t, hdr) % 16 == 0, "header rows start 16-byte aligned (read in 16-byte pairs)");
/* A header word: the call's 32-bit signature (never 0) above its number. A macro, as
 * IRIS_COLL_HDR_WORDS below: as force-inlined functions they made nvcc compile the LL
 * broadcast kernels differently (other PTX for the same arithmetic), and the
 * protocol's hot paths are kept instruction for instruction. */
#define IRIS_COLL_HDR_WORD(sig32, c) (((unsigned long long)(sig32) << 32) | (c))

/* Everything a collective kernel needs; plain data, passed by value. The state lives
 * on the heap at the same offsets on every rank.
 *
 * Calls and epochs. Every kernel launch of a collective is one "call" of the context,
 * numbered by the call word in device memory (call << 32 | CTAs of that call that have
 * started): every CTA adds one to it as it starts, and the CTA that completes the count
 * moves it on to the next call (iris_coll_call_enter), so a kernel has nothing to do at
 * its end. The host orders a context's launches one after another whatever the stream
 * (iris_detail_order_begin/end in iris.h), so every rank numbers its calls alike, and
 * every value derived from the number (barrier epochs, LL line epochs, progress values)
 * is fresh for every call: a call that failed (a mismatch, a timeout) leaves nothing that
 * a later call could mistake for its own. Nothing is reset; graphs replay.
 *
 * Headers. Each call starts with CTA 0 announcing (call number, signature) into every
 * peer's hdr[call & 1][me]. A rank accepts nothing of a call before it has seen every
 * peer announce the same call with the same signature; a different signature is a
 * mismatch: every rank sees it (each compares every peer's header), none writes a user
 * buffer, and the call is recorded as IRIS_FAULT_MISMATCH (IRIS_FAULT_MISMATCH_FATAL where
 * a side is a launch of a call the host split into several: IRIS_COLL_SIG_SPLIT, plan.h).
 *   - The barrier kernels (bandwidth path, device barrier) wait for every header before
 *     they touch anything (iris_coll_call_begin, release/acquire): the header exchange is
 *     their start barrier (a peer that announced call c has finished its call c - 1, so
 *     its buffers are free).
 *   - The LL kernels do not wait for it: they announce (relaxed) and push their lines.
 *     The broadcasts check the headers in the same polls that wait for the peers' lines,
 *     so the check adds no round trip (iris_coll_ll_wait). The other LL kernels' lines
 *     are tagged with the signature (iris_coll_ll_tag): a line of a peer whose call
 *     differs never reads as arrived, so a thread that has every peer's lines of this
 *     call has matched every peer, and reads no header at all; only a wait that lasts
 *     IRIS_COLL_LL_LAZY_POLLS polls starts reading them, to name a mismatch. Their lines
 *     land in the LL slots, never in a user buffer, until every peer matched.
 * Two parities suffice: no rank can be two calls ahead of another, because no call of a
 * rank ends before it has seen every peer's header or tagged lines of that call (or, in
 * the two-shot kernels, a line that a rank pushed only after it had seen them). A fatal
 * fault breaks that: its waits give up, the rank leaves the call without having seen
 * every peer, and its later launches (a split call's other chunks, the user's next calls)
 * still announce, overwriting the slot of a peer that has not read it yet. A header of a
 * later call in the slot a rank waits on therefore means that peer faulted: the waiter
 * records IRIS_FAULT_OUT_OF_STEP (fatal) at once, instead of waiting to its bound
 * (iris_coll_hdr_at_or_past). */
typedef struct iris_coll_dev {
  iris_device_ctx_t ctx;
  /* this rank's control block (iris_coll_ctl_t), its four parts one kernel parameter each
   * (IRIS_COLL_CALL_WORD, _HDR_WORDS, _BARRIER_ROW, _PROGRESS_ROW): as one base pointer
   * plus offsets, ptxas (sm_90a) gave every LL kernel 8 more instructions and the relay
   * broadcast 72 registers instead of 56 */
  unsigned long long *calls;  /* &ctl->calls */
  iris_coll_hdr_row_t *hdr;   /* ctl->hdr, [call & 1] */
  iris_coll_row_t *flags;     /* ctl->flags, [CTA] */
  iris_coll_row_t *progress;  /* ctl->progress, [CTA] */
  uint4 *ll;            /* the LL lines (iris_coll_ll_line): IRIS_COLL_LL_ROWS, IRIS_COLL_LL_SLOT */
  size_t ll_lines;      /* lines per (parity, src) */
  uint4 *ll2;           /* the two-shot LL's lines: IRIS_COLL_LL2_PHASE0 / _PHASE1, IRIS_COLL_LL2_SLOT */
  size_t ll2_lines;     /* lines per (parity, phase, src) */
  char *scratch;        /* the store two-shot's slots: IRIS_COLL_SCRATCH_SLOTS; IRIS_COLL_AR_SCRATCH_BYTES */
  int check;            /* 1: the LL kernels name a mismatched call (headers; IRIS_COLL_CHECK, default) */
  uint4 *arm;           /* the armed one-shot's slots: IRIS_COLL_ARM_ROWS, IRIS_COLL_ARM_SLOT */
  size_t arm_vecs;      /* 16-byte vectors per (parity, src) */
  unsigned long long *arm_dirty; /* &ctl->arm_dirty */
} iris_coll_dev_t;

/* ---- where each piece of the collective state is, for the device view d. Macros, as
 * IRIS_COLL_HDR_WORD: each computes its address with the arithmetic the kernels were
 * measured with (the LL kernels instruction for instruction). */
/* The call word (iris_coll_call_enter). */
#define IRIS_COLL_CALL_WORD(d) ((d).calls)
/* The header row (iris_coll_hdr_row_t) of call c's parity: its word p is what peer p
 * announced. */
#define IRIS_COLL_HDR_WORDS(d, c) ((d).hdr->from + (size_t)((c) & 1) * IRIS_MAX_RANKS)
/* CTA b's barrier row, flags[b][0..W): word p is the epoch that rank p's CTA b reached. */
#define IRIS_COLL_BARRIER_ROW(d, b) ((d).flags->from + (size_t)(b) * IRIS_MAX_RANKS)
/* CTA b's progress row, progress[b][0..W): word p is what rank p's CTA b published. */
#define IRIS_COLL_PROGRESS_ROW(d, b) ((d).progress->from + (size_t)(b) * IRIS_MAX_RANKS)
/* Whether header word v, read in a slot of call c's parity, announces call c or a later
 * one (wrap-safe; a signature is never 0, so an empty slot is neither). Later: that peer
 * left call c without this rank (a fatal fault of its own; see "Headers" above). */
IRIS_DEVICE_INLINE bool iris_coll_hdr_at_or_past(unsigned long long v, unsigned c) { return (v >> 32) != 0 && (int)((unsigned)v - c) >= 0; }
/* LL lines, [2 parity][W src][ll_lines]: the [src][line] rows of call c's parity, and in
 * them the line of src. */
#define IRIS_COLL_LL_ROWS(d, c, W) ((d).ll + ((size_t)((c) & 1) * (W)) * (d).ll_lines)
#define IRIS_COLL_LL_SLOT(rows, d, src, line) ((rows) + (size_t)(src) * (d).ll_lines + (line))
/* Two-shot LL lines, [2 parity][2 phase][W src][ll2_lines]: phase 0's rows of call c's
 * parity, phase 1's after them, and in either the line of src. */
#define IRIS_COLL_LL2_PHASE0(d, c, W) ((d).ll2 + (size_t)((c) & 1) * 2 * (W) * (d).ll2_lines)
#define IRIS_COLL_LL2_PHASE1(ph0, d, W) ((ph0) + (size_t)(W) * (d).ll2_lines)
#define IRIS_COLL_LL2_SLOT(rows, d, src, line) ((rows) + (size_t)(src) * (d).ll2_lines + (line))
/* Armed one-shot slots, [2 parity][W src][arm_vecs]: the [src][vector] rows of call c's
 * parity, and in them the vector of src. */
#define IRIS_COLL_ARM_ROWS(d, c, W) ((d).arm + ((size_t)((c) & 1) * (W)) * (d).arm_vecs)
#define IRIS_COLL_ARM_SLOT(rows, d, src, v) ((rows) + (size_t)(src) * (d).arm_vecs + (v))
/* The store two-shot's scratch, [2 halves][G CTAs][W src][slice elements of T]: CTA b's W
 * slots in round rd's half. */
#define IRIS_COLL_SCRATCH_SLOTS(d, T, rd, G, b, W, slice) ((T *)(d).scratch + (((rd) & 1) * (size_t)(G) + (size_t)(b)) * (size_t)(W) * (slice))
/* An LL line: 16 bytes, each 8-byte half 4 data bytes and a flag word (iris_coll_ll_line_t). */
static_assert(sizeof(uint4) == 16 && alignof(uint4) == 16, "an LL line is one aligned 16-byte access");

/* The fault-word site of wait `what` (IRIS_SITE_*) in a collective of kind KIND. */
#define IRIS_COLL_SITE(kind, what) ((unsigned)(((kind) + 1) << 8) | (unsigned)(what))
#define IRIS_COLL_KIND_DEVICE_BARRIER 5 /* iris_barrier_device, for fault reports */
#define IRIS_COLL_KIND_RMSNORM 7        /* iris_all_reduce_rmsnorm's kernels, for fault reports (6: the all-gather + GEMM plans) */
/* The signatures of iris_barrier_device's launches (the second: multi-node worlds, after
 * the rails): signatures no collective has, whose 32-bit forms differ and have the split
 * bit clear (IRIS_COLL_SIG_SPLIT, plan.h: one launch each). */
#define IRIS_COLL_SIG_BARRIER 0x6261727269657226ULL
#define IRIS_COLL_SIG_BARRIER_2 0x6261727269657222ULL
/* The signature of the launch a refused call takes part with (iris_coll_enqueue_on,
 * host.h): no collective's and no barrier's; one launch (the split bit clear). */
#define IRIS_COLL_SIG_REFUSED 0x7265667573656421ULL
/* The same for a refused iris_all_reduce_rmsnorm, whose peers may make several launches:
 * marked split (a mismatch with it is fatal). */
#define IRIS_COLL_SIG_REFUSED_SPLIT (IRIS_COLL_SIG_REFUSED | (unsigned long long)IRIS_COLL_SIG_SPLIT)
static_assert(((((unsigned)IRIS_COLL_SIG_BARRIER ^ (unsigned)(IRIS_COLL_SIG_BARRIER >> 32)) | 1u) & IRIS_COLL_SIG_SPLIT) == 0 &&
                  ((((unsigned)IRIS_COLL_SIG_BARRIER_2 ^ (unsigned)(IRIS_COLL_SIG_BARRIER_2 >> 32)) | 1u) & IRIS_COLL_SIG_SPLIT) == 0 &&
                  (((unsigned)IRIS_COLL_SIG_BARRIER ^ (unsigned)(IRIS_COLL_SIG_BARRIER >> 32)) | 1u) !=
                      (((unsigned)IRIS_COLL_SIG_BARRIER_2 ^ (unsigned)(IRIS_COLL_SIG_BARRIER_2 >> 32)) | 1u),
              "the device barrier's signatures: one launch each, distinct");
static_assert(((((unsigned)IRIS_COLL_SIG_REFUSED ^ (unsigned)(IRIS_COLL_SIG_REFUSED >> 32)) | 1u) & IRIS_COLL_SIG_SPLIT) == 0 &&
                  (((unsigned)IRIS_COLL_SIG_REFUSED ^ (unsigned)(IRIS_COLL_SIG_REFUSED >> 32)) | 1u) !=
                      (((unsigned)IRIS_COLL_SIG_BARRIER ^ (unsigned)(IRIS_COLL_SIG_BARRIER >> 32)) | 1u) &&
                  (((unsigned)IRIS_COLL_SIG_REFUSED ^ (unsigned)(IRIS_COLL_SIG_REFUSED >> 32)) | 1u) !=
                      (((unsigned)IRIS_COLL_SIG_BARRIER_2 ^ (unsigned)(IRIS_COLL_SIG_BARRIER_2 >> 32)) | 1u),
              "a refused call's signature: one launch, not the barrier's");
/* The signature of the launch a call of count 0 takes part with (iris_coll_enqueue_on):
 * no collective's, no barrier's, no refusal's; one launch. Ranks that all pass 0 meet in
 * it; a rank that alone passes 0 makes the others' call a mismatch instead of a wait. */
#define IRIS_COLL_SIG_EMPTY 0x656d707479636e74ULL
static_assert(((((unsigned)IRIS_COLL_SIG_EMPTY ^ (unsigned)(IRIS_COLL_SIG_EMPTY >> 32)) | 1u) & IRIS_COLL_SIG_SPLIT) == 0 &&
                  (((unsigned)IRIS_COLL_SIG_EMPTY ^ (unsigned)(IRIS_COLL_SIG_EMPTY >> 32)) | 1u) !=
                      (((unsigned)IRIS_COLL_SIG_REFUSED ^ (unsigned)(IRIS_COLL_SIG_REFUSED >> 32)) | 1u) &&
                  (((unsigned)IRIS_COLL_SIG_EMPTY ^ (unsigned)(IRIS_COLL_SIG_EMPTY >> 32)) | 1u) !=
                      (((unsigned)IRIS_COLL_SIG_BARRIER ^ (unsigned)(IRIS_COLL_SIG_BARRIER >> 32)) | 1u) &&
                  (((unsigned)IRIS_COLL_SIG_EMPTY ^ (unsigned)(IRIS_COLL_SIG_EMPTY >> 32)) | 1u) !=
                      (((unsigned)IRIS_COLL_SIG_BARRIER_2 ^ (unsigned)(IRIS_COLL_SIG_BARRIER_2 >> 32)) | 1u),
              "an empty call's signature: one launch, not a refusal's or the barrier's");
/* The same for an iris_all_reduce_rmsnorm of 0 tokens: marked split, as its refusal. */
#define IRIS_COLL_SIG_EMPTY_SPLIT (IRIS_COLL_SIG_EMPTY | (unsigned long long)IRIS_COLL_SIG_SPLIT)
static_assert((((unsigned)IRIS_COLL_SIG_EMPTY_SPLIT ^ (unsigned)(IRIS_COLL_SIG_EMPTY_SPLIT >> 32)) | 1u) & IRIS_COLL_SIG_SPLIT,
              "an empty fused op's signature: marked split");
static_assert((((unsigned)IRIS_COLL_SIG_REFUSED_SPLIT ^ (unsigned)(IRIS_COLL_SIG_REFUSED_SPLIT >> 32)) | 1u) & IRIS_COLL_SIG_SPLIT,
              "a refused fused op's signature: marked split");
/* The fault kind of a mismatch between this rank's call (sig32) and a peer's (its header
 * word hdr): IRIS_FAULT_MISMATCH_FATAL where either is a launch of a split call (the
 * ranks enqueued different numbers of launches, so their call numbers are out of step
 * for good), else IRIS_FAULT_MISMATCH. Cold path only. */
IRIS_DEVICE_INLINE unsigned iris_coll_mismatch_kind(unsigned sig32, unsigned long long hdr) {
  return iris_coll_sig_is_split(sig32) || iris_coll_sig_is_split((unsigned)(hdr >> 32)) ? IRIS_FAULT_MISMATCH_FATAL : IRIS_FAULT_MISMATCH;
}

/* CTA 0 of a kernel that saw a mismatch, before it ends: both parities of the armed slots
 * are dirty. A mismatched call may leave peers' stores in this rank's armed slots where no
 * reader re-arms them; every rank of that call sees the mismatch (each compares every
 * header) and marks them before its call ends, so every rank decides alike from the next
 * call on (iris_coll_arm_kernel: a call whose parity is dirty runs on the LL lines and
 * then re-arms that parity). */
IRIS_DEVICE_INLINE void iris_coll_arm_give_up(const iris_coll_dev_t &d) {
  if (d.arm_dirty) *(volatile unsigned long long *)d.arm_dirty = 3ULL;
}
/* Whole block, first thing of every collective kernel: this launch's call number. One
 * atomic per CTA on the call word; the CTA that completes the launch's count moves the
 * word to the next call (nobody of this launch touches it afterwards). Thread 0 asks; a
 * block barrier hands the number out, after the mover's atomic has returned too.
 * The latency kernels (launched with PDL) call this before their PDL wait, so the atomic
 * overlaps the end of the kernel before them on the stream: 0.23-0.34 us less per call in
 * graphs at 1 KB-256 KB on 2 H200s (docs/tuning.md, "PDL"). Calls still count in launch
 * order: such a kernel starts only once every CTA of the kernel before it has triggered
 * (iris_detail_pdl_trigger, which iris's kernels reach after this returns) or ended, and
 * every earlier launch of the context before that one, on this stream or (ordered by the
 * host) on another; a kernel launched without PDL starts after the one before it ends.
 * (The armed one-shot's CTA 0 reads the word after its trigger, waiting for it to leave
 * its call c: a later launch only moves it further.) */
IRIS_DEVICE_INLINE unsigned iris_coll_call_enter(const iris_coll_dev_t &d) {
  __shared__ unsigned s_call;
  if (threadIdx.x == 0) {
    unsigned long long w = atomicAdd(IRIS_COLL_CALL_WORD(d), 1ULL);
    /* the mover takes the call number from its move's result (the same call): the result
     * is used, so the move is done before the block barrier, not a fire-and-forget red */
    if ((unsigned)w + 1u == gridDim.x) w = atomicAdd(IRIS_COLL_CALL_WORD(d), (1ULL << 32) - gridDim.x);
    s_call = (unsigned)(w >> 32);
  }
  __syncthreads();
  return s_call;
}
/* The epoch an LL line of call c carries: c + 1, but never 0, which LL lines that no call
 * has written yet hold (call 0xffffffff takes 1: the last call of that parity to carry
 * 1 was 2^32 calls before). */
IRIS_DEVICE_INLINE unsigned iris_coll_ll_epoch(unsigned c) { return c + 1u != 0u ? c + 1u : 1u; }
/* The epoch before barrier 0 of call c (each barrier adds one). */
IRIS_DEVICE_INLINE unsigned iris_coll_sync_base(unsigned c) { return c * IRIS_COLL_SYNCS_PER_CALL; }
/* The signature as carried in headers: 32 bits, never 0. */
IRIS_DEVICE_INLINE unsigned iris_coll_sig32(unsigned long long sig) { return iris_coll_sig_fold(sig); }

/* Whole block; blockDim.x >= world_size. The row's slot p holds the epoch that rank p's
 * block reached; each call advances `epoch` by one and meets every rank's block there:
 * every write this block made before is visible to the other ranks' blocks after it
 * (block barrier, then a release per peer at system scope; acquire per peer, then a
 * block barrier). Returns false in every thread if a wait ran out (the fault is
 * recorded: `site`, the peer, `call`) or the context has a fatal fault. Graph-safe:
 * the epochs are device counters that only count up. */
IRIS_DEVICE_INLINE bool iris_detail_rank_sync(const iris_device_ctx_t &ctx, unsigned long long *row, unsigned &epoch, unsigned site, unsigned call) {
  const int W = ctx.world_size, t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z), me = ctx.rank;
  int ok = 1;
  epoch += 1;
  __syncthreads();
  if (t < W) {
    unsigned long long got = 0;
    iris_detail_spin_t spin = IRIS_DETAIL_SPIN_INIT;
    iris_signal(ctx, row + me, (unsigned long long)epoch, t);
    for (;;) {
      got = iris_atomic_load<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_SYSTEM>(row + t);
      if (iris_coll_sync_reached((unsigned)got, epoch)) break; /* not the half-range test: a row left long ago must not pass (plan.h) */
      if (iris_detail_wait_expired(ctx, spin, t, site, call)) { ok = 0; break; }
    }
#if defined(IRIS_DEBUG)
    if (!ok) {
      printf("iris: rank sync timed out on rank %d (block %d): rank %d never reached epoch %u\n", me, (int)blockIdx.x, t, epoch);
      iris_detail_trap();
    }
#endif
  }
  return __syncthreads_and(ok) != 0;
}
/* Whole block: barrier number (epoch - base) of call c for this CTA index. */
IRIS_DEVICE_INLINE bool iris_coll_barrier(const iris_coll_dev_t &d, unsigned &epoch, unsigned c, int kind) {
  return iris_detail_rank_sync(d.ctx, IRIS_COLL_BARRIER_ROW(d, blockIdx.x), epoch, IRIS_COLL_SITE(kind, IRIS_SITE_BARRIER), c);
}

/* Whole block, before the kernel reads anything a peer wrote in this call: CTA 0
 * announces call c with signature sig32 to every peer (release at system scope), and
 * every CTA waits (acquire) until every peer has announced call c. True if they all
 * announced the same signature. False in every thread on a mismatch (recorded as
 * IRIS_FAULT_MISMATCH, or IRIS_FAULT_MISMATCH_FATAL where a side is a launch of a split
 * call; every rank sees it, so no rank moves data for the call), a wait that ran out, or
 * a fatal fault of the context. */
IRIS_DEVICE_INLINE bool iris_coll_call_begin(const iris_coll_dev_t &d, unsigned c, unsigned sig32, int kind) {
  const int W = d.ctx.world_size, me = d.ctx.rank, t = threadIdx.x;
  unsigned long long *hdr = IRIS_COLL_HDR_WORDS(d, c);
  int ok = 1;
  if (blockIdx.x == 0 && t < W && t != me) iris_signal(d.ctx, hdr + me, IRIS_COLL_HDR_WORD(sig32, c), t);
  if (t < W && t != me) {
    unsigned long long v = 0;
    iris_detail_spin_t spin = IRIS_DETAIL_SPIN_INIT;
    for (;;) {
      v = iris_atomic_load<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_SYSTEM>(hdr + t);
      if (iris_coll_hdr_at_or_past(v, c)) break;
      if (iris_detail_wait_expired(d.ctx, spin, t, IRIS_COLL_SITE(kind, IRIS_SITE_HEADER), c)) { ok = 0; break; }
    }
    if (ok && (unsigned)v != c) { /* peer t is past call c: it faulted and will never announce c */
      ok = 0;
      if (blockIdx.x == 0) iris_detail_record_fault(d.ctx, IRIS_FAULT_OUT_OF_STEP, t, IRIS_COLL_SITE(kind, IRIS_SITE_HEADER), c);
    }
#if defined(IRIS_DEBUG)
    if (!ok) {
      printf("iris: collective call %u on rank %d (block %d): rank %d never announced it\n", c, me, (int)blockIdx.x, t);
      iris_detail_trap();
    }
#endif
    if (ok && (unsigned)(v >> 32) != sig32) {
      ok = 0;
      if (blockIdx.x == 0) {
        iris_coll_arm_give_up(d);
        iris_detail_record_fault(d.ctx, iris_coll_mismatch_kind(sig32, v), t, IRIS_COLL_SITE(kind, IRIS_SITE_HEADER), c);
      }
#if defined(IRIS_DEBUG)
      printf("iris: collective mismatch on rank %d (block %d, call %u): rank %d called a different collective, count, type, op, root or buffers\n", me,
             (int)blockIdx.x, c, t);
      iris_detail_trap();
#endif
    }
  }
  return __syncthreads_and(ok) != 0;
}

/* Whole block, first thing of every barrier-based kernel: this launch's call number and
 * the epoch before its first barrier; false when the call must not go on: a mismatch,
 * a wait that ran out, or a fatal fault. Then the kernel returns. */
IRIS_DEVICE_INLINE bool iris_coll_kernel_start(const iris_coll_dev_t &d, unsigned long long sig, int kind, unsigned &call, unsigned &epoch) {
  call = iris_coll_call_enter(d);
  epoch = iris_coll_sync_base(call);
  return iris_coll_call_begin(d, call, iris_coll_sig32(sig), kind);
}

/* ---- LL lines: 16 bytes = 8 data bytes + two flag words, stored and loaded so that
 * each 8-byte half (4 data bytes + a flag word) is one single-copy-atomic access. The
 * first flag word is the call's epoch; the second is the epoch too (an untagged line:
 * the broadcasts, the fused op's own exchange) or the tag (iris_coll_ll_tag: the call's
 * signature in it). */
typedef struct iris_coll_ll_line {
  unsigned data0, epoch, data1, tag;
} iris_coll_ll_line_t;
static_assert(sizeof(iris_coll_ll_line_t) == 16, "an LL line is one 16-byte access");
/* The tag of call c's lines (epoch = iris_coll_ll_epoch(c), sig32 = iris_coll_sig32(sig)).
 * sig32 is odd, so a tag and an epoch always differ in bit 0: an untagged line (of this
 * call or an earlier one) never passes for a tagged one, nor the reverse. A tagged line
 * of an earlier call of this slot (epoch e - 2k, signature s') passes for this call's
 * only if s' ^ sig32 == e ^ (e - 2k), and then only in its second half (the first half's
 * epoch is exact): a read torn between the halves of a peer's store of that rare pair. */
IRIS_DEVICE_INLINE unsigned iris_coll_ll_tag(unsigned epoch, unsigned sig32) { return epoch ^ sig32; }
/* Polls of a tagged LL wait before it reads the headers as well (to name a mismatch: a
 * peer whose call differs leaves the wait's lines unarrived). 256 is the first poll at
 * which the wait reads the clock (iris_detail_wait_expired). */
#define IRIS_COLL_LL_LAZY_POLLS 256u
IRIS_DEVICE_INLINE void iris_coll_ll_store(uint4 *p, uint2 data, unsigned epoch, unsigned tag) { iris_detail_st16_volatile(p, data.x, epoch, data.y, tag); }
/* An untagged line: the epoch in both flag words. */
IRIS_DEVICE_INLINE void iris_coll_ll_store(uint4 *p, uint2 data, unsigned epoch) { iris_coll_ll_store(p, data, epoch, epoch); }
/* One read of an LL line (each 8-byte half single-copy atomic). */
IRIS_DEVICE_INLINE uint4 iris_coll_ll_peek(const uint4 *p) { return iris_detail_ld16_volatile(p); }
/* Whether a line read by iris_coll_ll_peek carries epoch and tag (tag == epoch: an
 * untagged line) in its halves (then *data). */
IRIS_DEVICE_INLINE bool iris_coll_ll_ready(uint4 v, unsigned epoch, unsigned tag, uint2 *data) {
  if (v.y != epoch || v.w != tag) return false;
  data->x = v.x;
  data->y = v.z;
  return true;
}
IRIS_DEVICE_INLINE bool iris_coll_ll_ready(uint4 v, unsigned epoch, uint2 *data) { return iris_coll_ll_ready(v, epoch, epoch, data); }
/* ---- call headers seen from the LL kernels (see "Headers" above iris_coll_dev_t) */
/* Bit r set for every peer r of rank me in a world of W (W <= IRIS_MAX_RANKS <= 64). */
typedef unsigned long long iris_coll_mask_t;
IRIS_DEVICE_INLINE iris_coll_mask_t iris_coll_peer_mask(int W, int me) { return (W >= 64 ? ~0ULL : (1ULL << W) - 1ULL) & ~(1ULL << me); }
/* CTA 0, one thread per peer: announce call c with signature sig32 in every peer's header
 * slot, without waiting (relaxed: an LL line carries its own flag, and no data is read
 * on the strength of a header). */
IRIS_DEVICE_INLINE void iris_coll_announce(const iris_coll_dev_t &d, unsigned c, unsigned sig32) {
  const int t = threadIdx.x;
  if (blockIdx.x == 0 && t < d.ctx.world_size && t != d.ctx.rank)
    iris_signal_relaxed(d.ctx, IRIS_COLL_HDR_WORDS(d, c) + d.ctx.rank, IRIS_COLL_HDR_WORD(sig32, c), t);
}
/* Two adjacent 8-byte words, each read single-copy atomically (one 16-byte load on NVIDIA;
 * a header row pair starts 16-byte aligned because IRIS_MAX_RANKS is even). */
static_assert(IRIS_MAX_RANKS % 2 == 0, "IRIS_MAX_RANKS must be even (the call headers are read in 16-byte pairs)");
IRIS_DEVICE_INLINE void iris_coll_ld2(const unsigned long long *p, unsigned long long &a, unsigned long long &b) { iris_detail_ld2_volatile(p, a, b); }
/* Header words a poll has in flight at once (iris_coll_headers_poll): its loads are
 * volatile, so a load after a test of the one before (which may return) waits for it; a
 * batch's loads are all issued first. With 4 ranks as threads on one H200
 * (tools/proxy_fused.cu), all-reduce 1 KB / 8 KB: 3.57 / 3.80 us with the pairs read one
 * after another, 3.38-3.50 / 3.60-3.68 batched (header check off: 3.20-3.36 / 3.47-3.49). */
#define IRIS_COLL_HDR_BATCH 4
static_assert(IRIS_COLL_HDR_BATCH % 2 == 0, "header batches of whole pairs (a pair is read only where its first rank < W <= IRIS_MAX_RANKS, which is even)");
/* One thread: reads every peer's header slot of call c (IRIS_COLL_HDR_BATCH at once) and
 * sets bit r of `seen` for each peer r that announced (c, sig32). Returns 1 once every
 * peer of `all` is seen, 0 while some have not announced call c yet (*who: one of them),
 * -1 if a peer announced call c with another signature, or a later call (*who: that peer). */
IRIS_DEVICE_INLINE int iris_coll_headers_poll(const iris_coll_dev_t &d, unsigned c, unsigned sig32, iris_coll_mask_t all, iris_coll_mask_t &seen, int &who) {
  const unsigned long long *row = IRIS_COLL_HDR_WORDS(d, c), want = IRIS_COLL_HDR_WORD(sig32, c);
  const int W = d.ctx.world_size;
  int st = 1;
#pragma unroll
  for (int k0 = 0; k0 < IRIS_MAX_RANKS; k0 += IRIS_COLL_HDR_BATCH) {
    unsigned long long v[IRIS_COLL_HDR_BATCH];
    if (k0 >= W) break;
#pragma unroll
    for (int k = 0; k < IRIS_COLL_HDR_BATCH; k += 2) {
      v[k] = v[k + 1] = 0ULL;
      if (k0 + k < W) iris_coll_ld2(row + k0 + k, v[k], v[k + 1]);
    }
#pragma unroll
    for (int j = 0; j < IRIS_COLL_HDR_BATCH; j++) {
      const int r = k0 + j;
      if (r >= W) break;
      if (!((all & ~seen) >> r & 1)) continue;
      if (v[j] == want) seen |= 1ULL << r;
      else if (iris_coll_hdr_at_or_past(v[j], c)) { who = r; return -1; } /* another signature, or a peer past call c */
      else { who = r; st = 0; }
    }
  }
  return st;
}
/* After a mismatch in an LL kernel (peer `who` announced call c with another signature
 * than this rank's sig32, or a later call): record it (CTA 0; fatal where a side is a
 * launch of a split call: iris_coll_mismatch_kind; IRIS_FAULT_OUT_OF_STEP for a peer past
 * call c), then wait until every peer has announced call c or a later one, whatever its
 * signature, so that this rank ends the call only when no peer can still be in call
 * c - 1 (what the good path guarantees by matching every peer). Returns -1. */
IRIS_DEVICE_INLINE int iris_coll_ll_mismatch(const iris_coll_dev_t &d, unsigned c, unsigned sig32, int who, int kind) {
  const unsigned long long *row = IRIS_COLL_HDR_WORDS(d, c);
  const unsigned site = IRIS_COLL_SITE(kind, IRIS_SITE_HEADER);
  iris_detail_spin_t spin = IRIS_DETAIL_SPIN_INIT;
  if (blockIdx.x == 0) {
    const unsigned long long w = iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(row + who);
    iris_coll_arm_give_up(d);
    iris_detail_record_fault(d.ctx, (unsigned)w == c ? iris_coll_mismatch_kind(sig32, w) : IRIS_FAULT_OUT_OF_STEP, who, site, c);
  }
#if defined(IRIS_DEBUG)
  printf("iris: collective mismatch on rank %d (block %d, call %u): rank %d called a different collective, count, type, op, root or buffers\n", d.ctx.rank,
         (int)blockIdx.x, c, who);
  iris_detail_trap();
#endif
  for (int r = 0; r < d.ctx.world_size; r++)
    while (r != d.ctx.rank && !iris_coll_hdr_at_or_past(iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(row + r), c))
      if (iris_detail_wait_expired(d.ctx, spin, r, site, c)) return -1;
  return -1;
}
/* One thread of an LL kernel of kind `kind`, call c: waits until the LL line p written by
 * `peer` carries epoch and tag (then *data) AND every peer of `all` has announced (c,
 * sig32) (checked in the same polls, so it costs no round trip; `seen` remembers who
 * did). p == NULL: the headers alone. A tagged line (tag != epoch) is its own match: the
 * wait returns once it is in, and reads headers only after IRIS_COLL_LL_LAZY_POLLS
 * polls, for a mismatch. Returns 1 when it holds, so the caller may write its output; 0
 * when a wait ran out (recorded as a fault) or the context has a fatal fault; -1 on a
 * mismatch (recorded). */
IRIS_DEVICE_INLINE int iris_coll_ll_wait(const iris_coll_dev_t &d, const uint4 *p, unsigned epoch, unsigned tag, uint2 *data, int peer, unsigned c, unsigned sig32,
                                         iris_coll_mask_t all, iris_coll_mask_t &seen, int kind) {
  const bool lazy = p && tag != epoch;
  iris_detail_spin_t spin = IRIS_DETAIL_SPIN_INIT;
  for (;;) {
    const uint4 v = p ? iris_coll_ll_peek(p) : make_uint4(0, 0, 0, 0);
    int who = peer;
    if (seen != all && (!lazy || spin.polls >= IRIS_COLL_LL_LAZY_POLLS) && iris_coll_headers_poll(d, c, sig32, all, seen, who) < 0)
      return iris_coll_ll_mismatch(d, c, sig32, who, kind);
    if ((lazy || seen == all) && (!p || iris_coll_ll_ready(v, epoch, tag, data))) return 1;
    if (iris_detail_wait_expired(d.ctx, spin, who, IRIS_COLL_SITE(kind, seen == all ? IRIS_SITE_LL : IRIS_SITE_HEADER), c)) break;
  }
#if defined(IRIS_DEBUG)
  printf("iris: LL wait timed out on rank %d (block %d, thread %d, call %u): %s of rank %d never came\n", d.ctx.rank, (int)blockIdx.x, (int)threadIdx.x, c,
         seen == all ? "a data line" : "the call header", peer);
  iris_detail_trap();
#endif
  return 0;
}

/* Peers per batch of iris_coll_ll_wait_all: its loads are in flight together, and its
 * registers (a 16-byte line and 8 bytes of data per peer) bound the LL kernels' size. */
#define IRIS_COLL_LL_GROUP 8
/* One thread of an LL kernel: as iris_coll_ll_wait, for the peers of `want` among ranks
 * r0 .. r0 + NG - 1 at once; the line of rank r is at base + r * stride. Each poll peeks
 * at every pending line (all loads in flight, so the peers cost one memory round trip,
 * not one each) and, until all are seen, the headers (tagged lines: only after
 * IRIS_COLL_LL_LAZY_POLLS polls). Fills in[r - r0] for every r of the batch in `want`.
 * NG: a batch's size (iris_coll_ll_batch). */
template <int NG>
IRIS_DEVICE_INLINE int iris_coll_ll_wait_n(const iris_coll_dev_t &d, const uint4 *base, size_t stride, iris_coll_mask_t want, int r0, unsigned epoch,
                                           unsigned tag, uint2 (&in)[NG], unsigned c, unsigned sig32, iris_coll_mask_t all, iris_coll_mask_t &seen, int kind) {
  static_assert(NG >= 1 && NG <= IRIS_COLL_LL_GROUP, "a batch of 1 to IRIS_COLL_LL_GROUP peers");
  const bool lazy = tag != epoch;
  iris_detail_spin_t spin = IRIS_DETAIL_SPIN_INIT;
  unsigned pending = (unsigned)(want >> r0) & ((1u << NG) - 1u);
  base += (size_t)r0 * stride;
  for (;;) {
    uint4 v[NG];
#pragma unroll
    for (int k = 0; k < NG; k++) v[k] = pending >> k & 1 ? iris_coll_ll_peek(base + (size_t)k * stride) : make_uint4(0, 0, 0, 0);
    int who = -1;
    if (seen != all && (!lazy || spin.polls >= IRIS_COLL_LL_LAZY_POLLS) && iris_coll_headers_poll(d, c, sig32, all, seen, who) < 0)
      return iris_coll_ll_mismatch(d, c, sig32, who, kind);
#pragma unroll
    for (int k = 0; k < NG; k++)
      if ((pending >> k & 1) && iris_coll_ll_ready(v[k], epoch, tag, &in[k])) pending &= ~(1u << k);
    if (!pending && (lazy || seen == all)) return 1;
    if (who < 0) who = pending ? r0 + __ffs(pending) - 1 : 0;
    if (iris_detail_wait_expired(d.ctx, spin, who, IRIS_COLL_SITE(kind, seen == all ? IRIS_SITE_LL : IRIS_SITE_HEADER), c)) break;
  }
#if defined(IRIS_DEBUG)
  printf("iris: LL wait timed out on rank %d (block %d, thread %d, call %u): %s of rank %d never came\n", d.ctx.rank, (int)blockIdx.x, (int)threadIdx.x, c,
         seen == all ? "a data line" : "the call header", pending ? r0 + __ffs(pending) - 1 : 0);
  iris_detail_trap();
#endif
  return 0;
}
/* Untagged lines (the two-hop broadcast) in batches of IRIS_COLL_LL_GROUP peers. */
IRIS_DEVICE_INLINE int iris_coll_ll_wait_all(const iris_coll_dev_t &d, const uint4 *base, size_t stride, iris_coll_mask_t want, int r0, unsigned epoch,
                                             uint2 (&in)[IRIS_COLL_LL_GROUP], unsigned c, unsigned sig32, iris_coll_mask_t all, iris_coll_mask_t &seen, int kind) {
  return iris_coll_ll_wait_n<IRIS_COLL_LL_GROUP>(d, base, stride, want, r0, epoch, epoch, in, c, sig32, all, seen, kind);
}
/* The batch size for a world of W: the smallest of 2, 4 and IRIS_COLL_LL_GROUP that covers
 * it (W above it: batches of IRIS_COLL_LL_GROUP). The kernels whose threads take every
 * rank's line dispatch on it once per call (iris_coll_ll_collect, the fused RMSNorm):
 * the batch's instructions are what the waits and sums cost once the data are in. With
 * 2 ranks as threads on one H200 (tools/proxy_fused.cu), batches of 2 instead of 8 took
 * the all-reduce of 1 KB from 2.56 to 2.30 us, of 8 KB from 2.72 to 2.40, and the fused
 * all-reduce + RMSNorm of 8 tokens x 8192 from 5.56 to 4.95. */
IRIS_DEVICE_INLINE int iris_coll_ll_batch(int W) { return W <= 2 ? 2 : W <= 4 ? 4 : IRIS_COLL_LL_GROUP; }

/* ---- progress flags: one producer CTA tells the same CTA index of other ranks how far
 * it got in this call. progress[b][p] in rank c's heap is written only by CTA b of rank
 * p. A value is (call << 32 | steps done), where call is the CTA's epoch after the
 * call's start barrier: the same on every rank and larger than in any earlier call, so
 * a value left from an earlier call never passes for this one. Values are compared
 * within a window (iris_coll_progress_reached) and never reset, so graphs replay. A rank
 * that stops early (signature mismatch, a timed-out wait) publishes steps =
 * IRIS_COLL_RELAY_ABANDON to every peer: every wait on it ends at once, the waiter
 * abandons in turn, and every CTA still meets the end barrier, so epochs stay in step. */
static_assert(IRIS_COLL_AR_SCRATCH_BYTES >= (size_t)2 * IRIS_COLL_MAX_CTAS * 64 * 16, "the store two-shot needs a 16-byte slot per (half, CTA, rank)");
/* Every collective kernel gives each rank one thread of a block (iris_barrier_device's
 * block has 64 threads, the others 256 or 512): a larger IRIS_MAX_RANKS needs those widened. */
static_assert(IRIS_MAX_RANKS <= 64, "iris_collectives.h supports at most 64 ranks (IRIS_MAX_RANKS)");

IRIS_DEVICE_INLINE unsigned long long iris_coll_progress_value(unsigned call, unsigned done) { return ((unsigned long long)call << 32) | done; }

/* This rank's copy of the progress flag that `from`'s CTA blockIdx.x raises. */
IRIS_DEVICE_INLINE unsigned long long *iris_coll_progress_flag(const iris_coll_dev_t &d, int from) {
  return IRIS_COLL_PROGRESS_ROW(d, blockIdx.x) + from;
}

/* Whole block: once every thread's earlier stores (local or remote) are done
 * (__syncthreads), release-store value at system scope into rank `to`'s copy of this
 * CTA's flag (to = -1: into every peer's, thread t serving rank t). */
IRIS_DEVICE_INLINE void iris_coll_progress_publish(const iris_coll_dev_t &d, int to, unsigned long long value) {
  const int t = threadIdx.x;
  __syncthreads();
  if (to < 0 ? t < d.ctx.world_size && t != d.ctx.rank : t == 0) iris_signal(d.ctx, iris_coll_progress_flag(d, d.ctx.rank), value, to < 0 ? t : to);
}

/* Whole block: wait until rank `from` (-1: every peer) has published `done` steps of
 * this call (acquire at system scope; then the block meets, so every thread may read
 * what the publisher stored before). False in every thread on a timeout or if a
 * publisher abandoned the call. */
IRIS_DEVICE_INLINE bool iris_coll_progress_wait(const iris_coll_dev_t &d, int from, unsigned call, unsigned done, int kind) {
  const int t = threadIdx.x;
  int ok = 1;
  if (from < 0 ? t < d.ctx.world_size && t != d.ctx.rank : t == from) {
    const unsigned long long *flag = iris_coll_progress_flag(d, t);
    const unsigned long long want = iris_coll_progress_value(call, done);
    iris_detail_spin_t spin = IRIS_DETAIL_SPIN_INIT;
    for (;;) {
      if (iris_coll_progress_reached(iris_atomic_load<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_SYSTEM>(flag), want)) break;
      if (iris_detail_wait_expired(d.ctx, spin, t, IRIS_COLL_SITE(kind, IRIS_SITE_PROGRESS), call)) { ok = 0; break; }
    }
#if defined(IRIS_DEBUG)
    if (!ok) {
      printf("iris: progress wait timed out on rank %d (block %d): rank %d never reached step %u of call %u\n", d.ctx.rank, (int)blockIdx.x, t, done, call);
      iris_detail_trap();
    }
#endif
    ok = ok && (unsigned)iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(flag) != IRIS_COLL_RELAY_ABANDON;
  }
  return __syncthreads_and(ok) != 0;
}

#endif /* IRIS_INTERNAL_COLL_PROTOCOL_H */
