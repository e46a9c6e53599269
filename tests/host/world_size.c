/* tests/host/world_size.c: what depends on the world size (2 to 16): the rendezvous, the records, the collectives' planning arithmetic. */
#include "harness.h"

/* ---------------------------------------------------------- world sizes -- */
/* What depends on the world size W, checked at W = 2, 3, 4, 5, 7, 8 and 16 (MAXR ==
 * IRIS_MAX_RANKS): the rendezvous and the bring-up records at those sizes, and the
 * collectives' planning arithmetic (iris_collectives.h): who reduces, relays and stages
 * which bytes. docs/world_size.md lists what only a machine with that many GPUs shows. */
static const int k_worlds[] = {2, 3, 4, 5, 7, 8, 16};
#define NWORLDS ((int)(sizeof k_worlds / sizeof k_worlds[0]))

/* The rendezvous (iris_init's mode 1) among W forked ranks; the last one late at 8 and 16. */
static void test_world_rendezvous(void) {
  int i;
  char name[96];
  for (i = 0; i < NWORLDS; i++) {
    const int W = k_worlds[i];
    if (W == 2 || W == 4) continue; /* above */
    snprintf(name, sizeof name, "world %d: rendezvous allgather and 20 barriers + allgathers%s", W, W >= 8 ? ", last rank 200 ms late" : "");
    run_success(name, W, W >= 8 ? W - 1 : -1, 200, 20, g_dir, NULL, 0);
  }
}

/* 13 of 16 ranks come: rank 0's timeout names exactly the 3 that never arrived. */
static void test_world_missing_ranks(void) {
  const int timeout = 1000, n = 13;
  char name[80];
  gen_arg_t a;
  int ranks[MAXR], codes[MAXR], hung, i, ok;
  long long ms;
  unique_name(name, sizeof name, "missing16");
  gen_init(&a, name, MAXR, timeout);
  for (i = 0; i < n; i++) ranks[i] = i;
  ms = run_children(n, ranks, child_generic, &a, 10000, codes, &hung);
  ok = !hung;
  for (i = 0; i < n; i++) ok &= codes[i] == IRIS_ERROR_TIMEOUT;
  for (i = 0; i < MAXR; i++) ok &= names_rank(g_res[0].detail, i) == (i >= n);
  check(ok && has(g_res[0].detail, "13 of 16 present"), "world 16: rendezvous timeout names exactly the 3 missing ranks",
        "hung %d after %lld ms, rank 0 exit %d, detail '%s'", hung, ms, codes[0], g_res[0].detail);
}

/* Bring-up records at every W: equal ones pass; a different world size on the last rank
 * is named; iris_detail_rank_list names every flagged rank of a full world. */
static void test_world_records(void) {
  iris_detail_record_t rec[MAXR];
  char list[512], want[512], name[96];
  unsigned char flags[MAXR];
  int i, r;
  for (i = 0; i < NWORLDS; i++) {
    const int W = k_worlds[i];
    make_recs(rec, W);
    snprintf(name, sizeof name, "world %d: bring-up records all equal", W);
    expect_recs(name, rec, W, IRIS_SUCCESS, -1, NULL);
    make_recs(rec, W);
    rec[W - 1].world = W == 8 ? 4 : 8;
    snprintf(name, sizeof name, "world %d: bring-up records name the last rank's other world size", W);
    expect_recs(name, rec, W, IRIS_ERROR_MISMATCH, W - 1, "world size");
    size_t len = 0;
    want[0] = 0;
    for (r = 0; r < W; r++) {
      flags[r] = 1;
      len += (size_t)snprintf(want + len, sizeof want - len, r ? ",%d" : "%d", r);
    }
    iris_detail_rank_list(flags, W, list, sizeof list);
    snprintf(name, sizeof name, "world %d: rank list names all %d ranks", W, W);
    check(!strcmp(list, want), name, "'%s', want '%s'", list, want);
  }
}

/* Two-shot all-reduce (iris_coll_reduce_kernel): the chunks of ranks 0..W-1 tile
 * [0, count) in rank order, each starting on a whole 16-byte vector, none more than one
 * vector above its share; each rank's CTAs pull every peer's chunk once. */
static void test_world_all_reduce_plan(void) {
  static const size_t fixed[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 64, 100, 1001, 4097, 8195, 65539, 300007, (size_t)1 << 20, ((size_t)1 << 20) + 3,
                                 ((size_t)1 << 28) + 5};
  static const size_t pers[] = {2, 4, 8}; /* 16-byte vectors of int64, fp32/int32, fp16/bf16 */
  rng_t g = {g_seed ^ 0x5eed};
  int i;
  char name[160], why[256];
  for (i = 0; i < NWORLDS; i++) {
    const int W = k_worlds[i];
    int ok = 1, me, k, b, pi, c;
    why[0] = 0;
    for (pi = 0; pi < 3 && ok; pi++) {
      const size_t per = pers[pi];
      for (c = 0; c < (int)(sizeof fixed / sizeof fixed[0]) + 12 + 40 && ok; c++) {
        const int nf = (int)(sizeof fixed / sizeof fixed[0]);
        size_t count, prev = 0, share, lo, hi;
        int r;
        if (c < nf) count = fixed[c];
        else if (c < nf + 12) count = (size_t)W * per * (size_t)(1 + (c - nf) / 3) + (size_t)((c - nf) % 3) - 1; /* around multiples of W vectors */
        else count = 1 + (size_t)(rng_next(&g) % 5000000);
        share = (count + (size_t)W - 1) / (size_t)W;
        for (r = 0; r < W && ok; r++) {
          iris_coll_ar_range(count, W, per, r, &lo, &hi);
          if (lo != prev || hi < lo || hi > count || (lo < hi && lo % per) || hi - lo >= share + per)
            ok = 0, snprintf(why, sizeof why, "count %zu per %zu: rank %d gets [%zu, %zu) after [.., %zu) (share %zu)", count, per, r, lo, hi, prev, share);
          prev = hi;
        }
        if (ok && prev != count) ok = 0, snprintf(why, sizeof why, "count %zu per %zu: the chunks end at %zu", count, per, prev);
      }
    }
    snprintf(name, sizeof name, "world %d: two-shot all-reduce chunks tile the count once, in rank order, vector-aligned, balanced", W);
    check(ok, name, "%s", why);
    ok = 1;
    for (me = 0; me < W && ok; me++) {
      unsigned firsts[MAXR] = {0};
      for (b = 0; b < 2 * W + 3 && ok; b++) {
        unsigned seen = 0;
        for (k = 1; k < W && ok; k++) {
          const int p = iris_coll_ar_peer(me, k, b, W);
          if (p < 0 || p >= W || p == me || (seen >> p & 1u)) ok = 0, snprintf(why, sizeof why, "rank %d CTA %d: pull %d goes to rank %d", me, b, k, p);
          else seen |= 1u << p;
        }
        if (b < W - 1 && ok) firsts[iris_coll_ar_peer(me, 1, b, W)]++;
      }
      for (k = 0; k < W && ok; k++)
        if (k != me && firsts[k] != 1) ok = 0, snprintf(why, sizeof why, "rank %d: CTAs 0..%d start at rank %d %u times", me, W - 2, k, firsts[k]);
    }
    snprintf(name, sizeof name, "world %d: two-shot all-reduce gather: every CTA pulls each peer's chunk once, W-1 CTAs start at W-1 different peers", W);
    check(ok, name, "%s", why);
  }
}

/* Relay broadcast (iris_coll_launch_relay, iris_coll_relay_root, _owner_steps), W >= 3:
 * the kernel's plan from the host's chunk equals the host's, and every CTA has a chunk;
 * the W-1 parts have distinct non-root owners; the parts' chunks tile the message; and
 * replaying the stores of every CTA of the root and of every owner, each chunk of every
 * part lands exactly once in every non-root (its own part from the root, the others
 * from their owners). */
static int relay_case(int W, size_t bytes, int ctas, int root, unsigned char *seen, size_t seen_cap, char *why, size_t cap) {
  const iris_coll_relay_t r = iris_coll_relay_plan(bytes, W, ctas, 0);
  const int G = iris_coll_relay_ctas(&r, ctas);
  const iris_coll_relay_t k = iris_coll_relay_plan(bytes, W, G, r.chunk);
  size_t lo, hi, prev = 0, j;
  int p, me, b, q;
  unsigned owners = 0;
  if (k.part != r.part || k.chunk != r.chunk || k.chunks != r.chunks)
    return snprintf(why, cap, "bytes %zu ctas %d: host plan (%zu, %zu, %zu), kernel's with %d CTAs (%zu, %zu, %zu)", bytes, ctas, r.part, r.chunk, r.chunks, G, k.part,
                    k.chunk, k.chunks), 1;
  if (G < 1 || G > ctas || (size_t)G > r.chunks || r.part % 16 || r.chunk % 16 || r.chunk < IRIS_COLL_RELAY_MIN_CHUNK || r.chunk > IRIS_COLL_RELAY_MAX_CHUNK ||
      r.part * (size_t)(W - 1) < bytes || r.part >= (bytes + (size_t)W - 2) / (size_t)(W - 1) + 16 || r.chunks * r.chunk < r.part ||
      r.chunks >= IRIS_COLL_RELAY_ABANDON)
    return snprintf(why, cap, "bytes %zu ctas %d: plan part %zu chunk %zu chunks %zu, %d CTAs", bytes, ctas, r.part, r.chunk, r.chunks, G), 1;
  if ((size_t)(W - 1) * r.chunks > seen_cap) return snprintf(why, cap, "bytes %zu: %zu chunks per part: test buffer too small", bytes, r.chunks), 1;
  for (p = 0; p < W - 1; p++) { /* owners, and the tiling */
    q = iris_coll_relay_owner(p, root, W);
    if (q < 0 || q >= W || q == root || (owners >> q & 1u) || iris_coll_relay_part(q, root, W) != p)
      return snprintf(why, cap, "root %d: part %d owned by rank %d (part of that rank: %d)", root, p, q, iris_coll_relay_part(q, root, W)), 1;
    owners |= 1u << q;
    for (j = 0; j < r.chunks; j++) {
      iris_coll_relay_range(&r, bytes, p, j, &lo, &hi);
      if (lo != prev && lo != hi) return snprintf(why, cap, "bytes %zu: chunk %zu of part %d is [%zu, %zu), after %zu", bytes, j, p, lo, hi, prev), 1;
      if (hi > bytes || lo > hi) return snprintf(why, cap, "bytes %zu: chunk %zu of part %d is [%zu, %zu)", bytes, j, p, lo, hi), 1;
      if (lo < hi) prev = hi;
    }
  }
  if (prev != bytes) return snprintf(why, cap, "bytes %zu: the parts end at %zu", bytes, prev), 1;
  for (me = 0; me < W; me++) { /* replay every CTA of the root and of every owner: what lands in rank me */
    if (me == root) continue;
    memset(seen, 0, (size_t)(W - 1) * r.chunks);
    for (b = 0; b < G; b++) {
      const size_t steps = (size_t)b < r.chunks ? (r.chunks - 1 - (size_t)b) / (size_t)G + 1 : 0;
      size_t s;
      unsigned parts = 0;
      for (q = 0; q < W - 1; q++) { /* iris_coll_relay_root: chunk s of part (q + b) % (W-1) to its owner */
        p = (q + b) % (W - 1);
        if (parts >> p & 1u) return snprintf(why, cap, "root CTA %d visits part %d twice", b, p), 1;
        parts |= 1u << p;
      }
      for (s = 0; s < steps; s++) {
        if (s * G + b >= r.chunks) return snprintf(why, cap, "CTA %d step %zu: chunk %zu of %zu", b, s, s * G + b, r.chunks), 1;
        for (q = 0; q < W - 1; q++)
          if (iris_coll_relay_owner((q + b) % (W - 1), root, W) == me) seen[(size_t)((q + b) % (W - 1)) * r.chunks + s * G + b]++;
        for (int o = 0; o < W; o++) { /* iris_coll_relay_owner_steps on owner o: its chunk s to the other non-roots */
          const int mine = iris_coll_relay_part(o, root, W);
          if (o == root || o == me) continue;
          parts = 1u << mine;
          for (q = 0; q < W - 2; q++) {
            p = iris_coll_relay_peer_part(mine, q, b, W);
            if (p < 0 || p >= W - 1 || (parts >> p & 1u)) return snprintf(why, cap, "owner %d CTA %d: store %d goes to part %d", o, b, q, p), 1;
            parts |= 1u << p;
            if (iris_coll_relay_owner(p, root, W) == me) seen[(size_t)mine * r.chunks + s * G + b]++;
          }
        }
      }
    }
    for (j = 0; j < (size_t)(W - 1) * r.chunks; j++)
      if (seen[j] != 1)
        return snprintf(why, cap, "bytes %zu, %d CTAs, root %d: rank %d gets chunk %zu of part %zu %u times", bytes, G, root, me, j % r.chunks, j / r.chunks, seen[j]), 1;
  }
  return 0;
}
/* Store two-shot all-reduce (iris_coll_ar_store_kernel): a slot is whole 16-byte
 * vectors, the two halves of every CTA's W slots fit the scratch area, the rounds cover
 * each chunk exactly (no round left empty for every CTA, none missing), and round
 * numbers stay below IRIS_COLL_RELAY_ABANDON. */
static void test_world_ar_store_plan(void) {
  const size_t GB = (size_t)1 << 30;
  const size_t bytes[] = {16, 4 << 20, (4 << 20) + 2, 80000006, GB, 16 * GB + 8};
  const int ctas[] = {1, 3, 7, 78, 132, 256};
  static const size_t ess[] = {2, 4, 8};
  char name[160], why[256];
  int i;
  for (i = 0; i < NWORLDS; i++) {
    const int W = k_worlds[i];
    int ok = 1, ei, ci, bi;
    why[0] = 0;
    for (ei = 0; ei < 3 && ok; ei++)
      for (ci = 0; ci < 6 && ok; ci++) {
        const size_t es = ess[ei], per = 16 / es;
        for (bi = 0; bi < 6 && ok; bi++) {
          const size_t count = bytes[bi] / es, chunk = iris_coll_ar_chunk(count, W, per), slice = iris_coll_ar_slice(es, W, ctas[ci], count);
          const size_t rounds = iris_coll_ar_rounds(count, W, per, ctas[ci], slice), round = (size_t)ctas[ci] * slice;
          if (slice < per || slice % per || 2 * (size_t)ctas[ci] * (size_t)W * slice * es > IRIS_COLL_AR_SCRATCH_BYTES)
            ok = 0, snprintf(why, sizeof why, "es %zu, %d CTAs, count %zu: slot of %zu elements", es, ctas[ci], count, slice);
          else if (rounds * round < chunk || (rounds && (rounds - 1) * round >= chunk) || rounds >= IRIS_COLL_RELAY_ABANDON)
            ok = 0, snprintf(why, sizeof why, "es %zu, %d CTAs, count %zu: %zu rounds of %zu for a chunk of %zu", es, ctas[ci], count, rounds, round, chunk);
          else if (rounds == 1 && slice > ((chunk + (size_t)ctas[ci] - 1) / (size_t)ctas[ci] + per - 1) / per * per) /* one round: spread over the CTAs */
            ok = 0, snprintf(why, sizeof why, "es %zu, %d CTAs, count %zu: one round of slices of %zu leaves CTAs idle", es, ctas[ci], count, slice);
        }
      }
    snprintf(name, sizeof name, "world %d: store two-shot all-reduce: slots fit the scratch area, rounds cover every chunk once", W);
    check(ok, name, "%s", why);
  }
}
/* Chain broadcast (iris_coll_launch_chain, iris_coll_chain_kernel): chunks are 16-byte
 * multiples within the relay's limits, tile the message once, the grid has no CTA
 * without a chunk, and replaying every CTA's steps visits each chunk exactly once. */
static void test_chain_plan(void) {
  const size_t MB = (size_t)1 << 20;
  const size_t sizes[] = {1, 17, 16 * MB, 16 * MB + 20, 80 * MB + 6, 1024 * MB + 7, (size_t)13 << 30};
  const int ctas[] = {1, 3, 7, 78, 132, 256};
  char why[256] = "";
  int ok = 1, si, ci;
  for (si = 0; si < 7 && ok; si++)
    for (ci = 0; ci < 6 && ok; ci++) {
      const size_t bytes = sizes[si], chunk = iris_coll_chain_chunk(bytes, ctas[ci]), chunks = iris_coll_chain_chunks(bytes, chunk);
      const int G = (size_t)ctas[ci] > chunks ? (int)chunks : ctas[ci];
      size_t visited = 0, b;
      if (chunk % 16 || chunk < IRIS_COLL_RELAY_MIN_CHUNK || chunk > IRIS_COLL_RELAY_MAX_CHUNK || chunks * chunk < bytes || (chunks - 1) * chunk >= bytes ||
          chunks >= IRIS_COLL_RELAY_ABANDON || G < 1)
        ok = 0, snprintf(why, sizeof why, "bytes %zu, %d CTAs: chunk %zu, %zu chunks, %d CTAs", bytes, ctas[ci], chunk, chunks, G);
      for (b = 0; b < (size_t)G && ok; b++) { /* steps of CTA b: chunks b, b + G, ... */
        const size_t steps = b < chunks ? (chunks - 1 - b) / (size_t)G + 1 : 0;
        if (!steps || (steps - 1) * (size_t)G + b >= chunks) ok = 0, snprintf(why, sizeof why, "bytes %zu: CTA %zu has %zu steps", bytes, b, steps);
        visited += steps;
      }
      if (ok && visited != chunks) ok = 0, snprintf(why, sizeof why, "bytes %zu, %d CTAs: %zu chunks visited of %zu", bytes, G, visited, chunks);
    }
  check(ok, "chain broadcast: chunks tile the message once, every CTA has one, each is visited once", "%s", why);
}
/* The staged copy (iris_coll_launch_staged, iris_coll_staged_kernel): chunks are 16-byte
 * multiples of at least IRIS_COLL_STAGED_MIN_CHUNK, tile the block once, and give each
 * CTA of the clamped grid at least one and at most about IRIS_COLL_STAGED_STEPS + 1 steps. */
static void test_staged_plan(void) {
  const size_t MB = (size_t)1 << 20;
  const size_t sizes[] = {1, 17, 16384, 16385, 300007 * 4, 4 * MB, 16 * MB + 20, 64 * MB, (size_t)3 << 30};
  const int ctas[] = {1, 3, 33, 78, 132, 256};
  char why[256] = "";
  int ok = 1, si, ci;
  for (si = 0; si < 9 && ok; si++)
    for (ci = 0; ci < 6 && ok; ci++) {
      const size_t bytes = sizes[si], chunk = iris_coll_staged_chunk(bytes, ctas[ci]), chunks = (bytes + chunk - 1) / chunk;
      const size_t G = (size_t)ctas[ci] > chunks ? chunks : (size_t)ctas[ci], steps0 = (chunks - 1) / G + 1;
      if (chunk % 16 || chunk < IRIS_COLL_STAGED_MIN_CHUNK || chunks * chunk < bytes || (chunks - 1) * chunk >= bytes || G < 1 ||
          (chunk > IRIS_COLL_STAGED_MIN_CHUNK && steps0 > IRIS_COLL_STAGED_STEPS + 1) || chunks >= IRIS_COLL_RELAY_ABANDON)
        ok = 0, snprintf(why, sizeof why, "bytes %zu, %d CTAs: chunk %zu, %zu chunks, grid %zu, %zu steps", bytes, ctas[ci], chunk, chunks, G, steps0);
    }
  check(ok, "staged copy: chunks of whole vectors tile each block once, about IRIS_COLL_STAGED_STEPS per CTA", "%s", why);
}
/* Which bandwidth-path calls with buffers off the heap run the staged kernels
 * (iris_coll_takes_staged): the kinds whose recv peers store into, when recv is off the
 * heap (the broadcast at 2 ranks or below the relay), the all-reduce from its threshold
 * (another at 2 ranks),
 * the reduce-scatter by its input wherever its buffers lie; none with fused staging off. */
static void test_staged_choice(void) {
  const size_t M = IRIS_COLL_AR_STAGED_MIN, M2 = IRIS_COLL_AR_STAGED_MIN_W2, R = IRIS_COLL_RELAY_MIN_BYTES;
  static const struct { int kind, W; size_t bytes, in; int heap_out, fused, want; } c[] = {
      {IRIS_COLL_AG, 4, 1 << 20, 1 << 20, 0, 1, 1},  {IRIS_COLL_AG, 4, 1 << 20, 1 << 20, 1, 1, 0},  {IRIS_COLL_AG, 4, 1 << 20, 1 << 20, 0, 0, 0},
      {IRIS_COLL_A2A, 3, 4096, 3 * 4096, 0, 1, 1},   {IRIS_COLL_A2A, 3, 4096, 3 * 4096, 1, 1, 0},
      {IRIS_COLL_BC, 2, 64 << 20, 64 << 20, 0, 1, 1}, {IRIS_COLL_BC, 4, 64 << 20, 64 << 20, 0, 1, 0},
      {IRIS_COLL_AR, 4, 0, 0, 0, 1, 0},             {IRIS_COLL_AR, 4, 0, 0, 1, 1, 0},             {IRIS_COLL_AR, 4, 0, 0, 0, 0, 0},
      {IRIS_COLL_RS, 4, 0, 0, 1, 1, 0},             {IRIS_COLL_RS, 4, 0, 0, 0, 1, 0},             {IRIS_COLL_RS, 4, 0, 0, 1, 0, 0},
  };
  char why[200] = "";
  int ok = 1;
  size_t i;
  for (i = 0; i < sizeof c / sizeof c[0] && ok; i++) {
    const int got = iris_coll_takes_staged(c[i].kind, c[i].W, c[i].bytes, c[i].in, c[i].heap_out, c[i].fused);
    if (got != c[i].want) ok = 0, snprintf(why, sizeof why, "case %zu (kind %d, %zu bytes, heap recv %d, fused %d): %d", i, c[i].kind, c[i].bytes, c[i].heap_out, c[i].fused, got);
  }
  /* the thresholds themselves: one byte below and at them */
  if (ok && (iris_coll_takes_staged(IRIS_COLL_AR, 4, M - 1, M - 1, 0, 1) || !iris_coll_takes_staged(IRIS_COLL_AR, 4, M, M, 0, 1) ||
             iris_coll_takes_staged(IRIS_COLL_RS, 4, (M - 1) / 4, M - 1, 1, 1) || !iris_coll_takes_staged(IRIS_COLL_RS, 4, M / 4, M, 1, 1) ||
             !iris_coll_takes_staged(IRIS_COLL_BC, 3, R - 1, R - 1, 0, 1) || iris_coll_takes_staged(IRIS_COLL_BC, 3, R, R, 0, 1)))
    ok = 0, snprintf(why, sizeof why, "at the all-reduce / reduce-scatter (%zu) or relay (%zu) thresholds", M, R);
  /* at 2 ranks the all-reduce has its own threshold */
  if (ok && (iris_coll_takes_staged(IRIS_COLL_AR, 2, M2 - 1, M2 - 1, 0, 1) || !iris_coll_takes_staged(IRIS_COLL_AR, 2, M2, M2, 0, 1) ||
             (M2 > M && iris_coll_takes_staged(IRIS_COLL_AR, 2, M, M, 0, 1))))
    ok = 0, snprintf(why, sizeof why, "at the 2-rank all-reduce threshold (%zu)", M2);
  check(ok, "staged kernels: which calls with buffers off the heap take them", "%s", why);
}
/* Barrier and progress words: reached at the target and up to IRIS_COLL_SYNC_AHEAD past
 * it, across the 32-bit wrap; a row left 2^28 or more calls ago (or never written, once
 * call numbers pass 2^28) is not, where the half-range test took it for reached. */
static void test_sync_reached(void) {
  const unsigned S = IRIS_COLL_SYNCS_PER_CALL, A = IRIS_COLL_SYNC_AHEAD;
  static const unsigned calls[] = {0u, 1u, 12345u, 1u << 28, (1u << 28) + 77u, 0x7fffffffu, 0xfffffff0u, 0xffffffffu};
  char why[200] = "";
  int ok = A >= 4 * S; /* a peer's CTA is at most a call's barriers ahead, with room to spare */
  size_t i;
  for (i = 0; i < sizeof calls / sizeof calls[0] && ok; i++) {
    const unsigned c = calls[i], e = c * S + 1u; /* barrier 0 of call c */
    const unsigned long long p = ((unsigned long long)e << 32) | 5u;
    unsigned age;
    if (!iris_coll_sync_reached(e, e) || !iris_coll_sync_reached(e + S, e) || !iris_coll_sync_reached(e + A - 1u, e) || iris_coll_sync_reached(e - 1u, e) ||
        iris_coll_sync_reached(e + A, e))
      ok = 0, snprintf(why, sizeof why, "call %u: at / ahead / behind the barrier epoch", c);
    if (ok && (!iris_coll_progress_reached(p, p) || !iris_coll_progress_reached(p + 1u, p) || !iris_coll_progress_reached(p + ((unsigned long long)S << 32), p) ||
               iris_coll_progress_reached(p - 1u, p) || iris_coll_progress_reached(p - ((unsigned long long)1 << 32), p)))
      ok = 0, snprintf(why, sizeof why, "call %u: progress at / ahead / behind", c);
    /* rows left `age` calls ago, every age from 2^28 to 2^29 in coarse steps (the
     * half-range test passes them all): none passes but within 8 calls of 2^29 */
    for (age = 1u << 28; ok && age < (1u << 29) - 8u; age += 4099u) {
      const unsigned old = (c - age) * S + 3u;
      if (iris_coll_sync_reached(old, e) || iris_coll_progress_reached((unsigned long long)old << 32, p))
        ok = 0, snprintf(why, sizeof why, "call %u: a row %u calls old reads as reached", c, age);
    }
  }
  /* a row never written (0) once the call numbers pass 2^28 */
  if (ok && (iris_coll_sync_reached(0u, (1u << 28) * S + 1u) || iris_coll_sync_reached(0u, 0x30000005u * S + 1u) ||
             iris_coll_progress_reached(0ULL, ((unsigned long long)((1u << 28) * S + 1u) << 32))))
    ok = 0, snprintf(why, sizeof why, "an unwritten row reads as reached");
  /* what the old half-range test got wrong, for the record */
  if (ok && (int)(0u - ((1u << 28) * S + 1u)) < 0) ok = 0, snprintf(why, sizeof why, "the half-range test no longer fails here: revisit the comment");
  check(ok, "collectives: barrier and progress words count as reached only within IRIS_COLL_SYNC_AHEAD past the target (stale rows do not)", "%s", why);
}

/* Under a CTA cap the one-shot is kept while each thread moves at most
 * IRIS_COLL_LL_CAPPED_LINES lines; uncapped it always fits. */
static void test_ll_within_cap(void) {
  const size_t per = (size_t)IRIS_COLL_LL_THREADS * IRIS_COLL_LL_CAPPED_LINES * 8; /* bytes one CTA covers at the limit */
  static const int caps[] = {1, 16, 32, 64, 256};
  char why[200] = "";
  int ok = iris_coll_ll_within_cap((size_t)1 << 40, 0) && iris_coll_ll_within_cap(1, 1) && iris_coll_ll_within_cap(0, 7);
  size_t i;
  for (i = 0; i < sizeof caps / sizeof caps[0] && ok; i++) {
    const size_t edge = per * (size_t)caps[i];
    if (!iris_coll_ll_within_cap(edge, caps[i]) || !iris_coll_ll_within_cap(edge - 7, caps[i]) || iris_coll_ll_within_cap(edge + 1, caps[i]))
      ok = 0, snprintf(why, sizeof why, "cap %d: at %zu bytes %d, one more %d", caps[i], edge, iris_coll_ll_within_cap(edge, caps[i]), iris_coll_ll_within_cap(edge + 1, caps[i]));
  }
  /* the measured cases (docs/tuning.md): 2 ranks, bf16 */
  if (ok && (iris_coll_ll_within_cap((size_t)256 << 10, 32) || !iris_coll_ll_within_cap((size_t)128 << 10, 32) || iris_coll_ll_within_cap((size_t)512 << 10, 64) ||
             !iris_coll_ll_within_cap((size_t)256 << 10, 64) || !iris_coll_ll_within_cap((size_t)64 << 10, 16)))
    ok = 0, snprintf(why, sizeof why, "a measured case chose the other kernel");
  check(ok, "a CTA cap: the one-shot only while its threads move at most IRIS_COLL_LL_CAPPED_LINES lines each", "%s", why);
}

static void test_world_relay_plan(void) {
  const size_t MB = (size_t)1 << 20;
  const size_t sizes[] = {1, 16, 17, 1000, 65536 + 3, 2 * MB, 2 * MB + 1, 2 * MB + 16 * 15 + 3, 4000012, 24 * MB + 2, 80 * MB + 6, 1024 * MB, 1024 * MB + 7};
  const int ctas[] = {1, 3, 7, 78, 132, 256};
  const size_t cap = (size_t)16 * 70000;
  unsigned char *seen = (unsigned char *)malloc(cap);
  char name[160], why[256];
  int i;
  if (!seen) {
    check(0, "relay plan test buffer", "out of host memory");
    return;
  }
  for (i = 0; i < NWORLDS; i++) {
    const int W = k_worlds[i];
    int bad = 0, si, ci;
    if (W < 3) continue; /* one pull from the root at 2 ranks */
    why[0] = 0;
    for (si = 0; si < (int)(sizeof sizes / sizeof sizes[0]) && !bad; si++)
      for (ci = 0; ci < (int)(sizeof ctas / sizeof ctas[0]) && !bad; ci++) {
        const int roots[3] = {0, W / 2, W - 1};
        int ri;
        for (ri = 0; ri < 3 && !bad; ri++)
          if (sizes[si] < 1024 * MB || ri == 0) bad = relay_case(W, sizes[si], ctas[ci], roots[ri], seen, cap, why, sizeof why);
      }
    snprintf(name, sizeof name, "world %d: relay broadcast: W-1 parts with distinct owners, the kernel's plan is the host's, every rank gets every chunk once", W);
    check(!bad, name, "%s", why);
  }
  free(seen);
}

/* CTA counts of the bandwidth kernels and the staging steps at every W. */
static void test_world_ctas_staging(void) {
  const size_t sizes[] = {1, 1000, 32768, (size_t)1 << 20, (size_t)64 << 20, (size_t)1 << 30, (size_t)1 << 40};
  const int smss[] = {1, 78, 132, 300}, forced[] = {1, 7, 256};
  const size_t requests[] = {1, 100, IRIS_COLL_STAGING_MIN - 1, IRIS_COLL_STAGING_MIN, IRIS_COLL_STAGING_MIN + 1, 3000, ((size_t)1 << 20) + 7,
                             IRIS_COLL_STAGING_BYTES};
  char name[160], why[256];
  int i;
  for (i = 0; i < NWORLDS; i++) {
    const int W = k_worlds[i];
    int ok = 1, si, mi, fi, ar;
    why[0] = 0;
    for (ar = 0; ar < 2; ar++)
      for (mi = 0; mi < 4 && ok; mi++) {
        int last = 0;
        for (si = 0; si < (int)(sizeof sizes / sizeof sizes[0]) && ok; si++) {
          const int n = iris_coll_auto_ctas(ar, sizes[si], W, smss[mi], 0), cap = smss[mi] < IRIS_COLL_MAX_CTAS ? smss[mi] : IRIS_COLL_MAX_CTAS;
          const int store = ar && IRIS_COLL_PUSH && sizes[si] >= IRIS_COLL_AR_STORE_MIN; /* the store two-shot: a fixed count */
          const int want_store = IRIS_COLL_AR_STORE_CTAS < cap ? IRIS_COLL_AR_STORE_CTAS : cap;
          if (n < 1 || n > cap || (!store && n < last) || (store && n != want_store) || (!ar && sizes[si] == (size_t)1 << 40 && n != cap))
            ok = 0, snprintf(why, sizeof why, "%s %zu bytes, %d SMs: %d CTAs (after %d)", ar ? "all-reduce" : "other", sizes[si], smss[mi], n, last);
          last = n;
        }
        for (fi = 0; fi < 3 && ok; fi++)
          if (iris_coll_auto_ctas(ar, (size_t)1 << 20, W, smss[mi], forced[fi]) != forced[fi])
            ok = 0, snprintf(why, sizeof why, "forced %d CTAs gave %d", forced[fi], iris_coll_auto_ctas(ar, (size_t)1 << 20, W, smss[mi], forced[fi]));
      }
    snprintf(name, sizeof name, "world %d: bandwidth kernels: 1..min(SMs, %d) CTAs, growing with size (the store all-reduce: fixed), forced counts kept", W, IRIS_COLL_MAX_CTAS);
    check(ok, name, "%s", why);
    /* the bandwidth path's grid per kind: at 2 ranks the copy kernels capped up to
     * IRIS_COLL_COPY_CAPPED_MAX_W2 per peer; everything else as iris_coll_auto_ctas */
    ok = 1;
    why[0] = 0;
    {
      const size_t bw_sizes[] = {1, 32768, (size_t)512 << 10, (size_t)2 << 20, IRIS_COLL_COPY_CAPPED_MAX_W2, IRIS_COLL_COPY_CAPPED_MAX_W2 + 16, (size_t)64 << 20};
      int kind;
      for (kind = IRIS_COLL_AR; kind < IRIS_COLL_KINDS && ok; kind++)
        for (mi = 0; mi < 4 && ok; mi++)
          for (si = 0; si < (int)(sizeof bw_sizes / sizeof bw_sizes[0]) && ok; si++) {
            const size_t b = bw_sizes[si];
            const int a = iris_coll_auto_ctas(kind == IRIS_COLL_AR, b, W, smss[mi], 0), g = iris_coll_bw_ctas(kind, b, W, smss[mi], 0);
            const int copy = kind == IRIS_COLL_AG || kind == IRIS_COLL_A2A || kind == IRIS_COLL_BC;
            const int want = copy && W == 2 && b <= IRIS_COLL_COPY_CAPPED_MAX_W2 && a > IRIS_COLL_COPY_CTAS_W2 ? IRIS_COLL_COPY_CTAS_W2 : a;
            if (g != want || g < 1) ok = 0, snprintf(why, sizeof why, "kind %d, %zu bytes per peer, %d SMs: %d CTAs (automatic %d, want %d)", kind, b, smss[mi], g, a, want);
            if (ok && iris_coll_bw_ctas(kind, b, W, smss[mi], 7) != 7) ok = 0, snprintf(why, sizeof why, "kind %d, %zu bytes: forced 7 CTAs not kept", kind, b);
          }
      if (ok && W == 2 && iris_coll_bw_ctas(IRIS_COLL_AG, (size_t)4 << 20, W, 132, 0) != IRIS_COLL_COPY_CTAS_W2)
        ok = 0, snprintf(why, sizeof why, "an all-gather of 4 MB per peer at 2 ranks is not capped");
    }
    snprintf(name, sizeof name, "world %d: the bandwidth path's grid per kind (at 2 ranks the copy kernels: at most %d CTAs up to %zu bytes per peer)", W,
             IRIS_COLL_COPY_CTAS_W2, (size_t)IRIS_COLL_COPY_CAPPED_MAX_W2);
    check(ok, name, "%s", why);
    ok = iris_coll_staging_bytes(0) == 0;
    for (si = 0; si < (int)(sizeof requests / sizeof requests[0]) && ok; si++) {
      const size_t S = iris_coll_staging_bytes(requests[si]), ess[3] = {2, 4, 8};
      int e, chunked;
      if (S < requests[si] || S < IRIS_COLL_STAGING_MIN) ok = 0, snprintf(why, sizeof why, "staging request %zu gives %zu bytes", requests[si], S);
      for (e = 0; e < 3 && ok; e++)
        for (chunked = 0; chunked < 2 && ok; chunked++) {
          const size_t step = iris_coll_staging_step(S, ess[e], W, chunked);
          if (step < 16 || step % 16 || step * ess[e] * (size_t)(chunked ? W : 1) > S)
            ok = 0, snprintf(why, sizeof why, "staging %zu bytes (asked %zu), %zu-byte elements, %s: step %zu", S, requests[si], ess[e], chunked ? "W blocks" : "plain", step);
        }
    }
    snprintf(name, sizeof name, "world %d: staged launches: whole 16-element steps that fit the staging area (W blocks for chunked buffers)", W);
    check(ok, name, "%s", why);
  }
}
