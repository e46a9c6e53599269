/* tests/host/heap.c: the symmetric heap's allocator: random sequences against its invariants, alignment, exhaustion, errors. */
#include "harness.h"

/* ------------------------------------------------------------ allocator -- */
#define FAKE_BASE ((void *)(uintptr_t)0x100000000ULL)
#define ROUND256(n) (((size_t)(n) + 255) & ~(size_t)255)

typedef struct live {
  void *p;
  size_t bytes;
} live_t;

static int cmp_live(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const live_t *)a)->p, y = (uintptr_t)((const live_t *)b)->p;
  return x < y ? -1 : x > y;
}

/* Checks the invariants of the live set; returns 0 or writes why. */
static int heap_invariants(const iris_t *ctx, void *base, size_t heap, live_t *lv, int n, char *why, size_t cap) {
  live_t sorted[512];
  size_t used = 0, off;
  int i;
  uintptr_t b = (uintptr_t)base;
  memcpy(sorted, lv, sizeof *lv * (size_t)n);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_live);
  for (i = 0; i < n; i++) {
    uintptr_t p = (uintptr_t)sorted[i].p;
    size_t sz = ROUND256(sorted[i].bytes);
    if (p < b || p + sz > b + heap) return snprintf(why, cap, "block %#lx+%zu outside [base, base+%zu)", (unsigned long)(p - b), sz, heap), 1;
    if ((p - b) % IRIS_HEAP_ALIGN || p % IRIS_HEAP_ALIGN) return snprintf(why, cap, "block at offset %lu not 256-aligned", (unsigned long)(p - b)), 1;
    if (i > 0 && (uintptr_t)sorted[i - 1].p + ROUND256(sorted[i - 1].bytes) > p)
      return snprintf(why, cap, "blocks at offsets %lu (+%zu) and %lu overlap", (unsigned long)((uintptr_t)sorted[i - 1].p - b),
                      ROUND256(sorted[i - 1].bytes), (unsigned long)(p - b)),
             1;
    if (iris_heap_offset(ctx, sorted[i].p, &off) != IRIS_SUCCESS || off != p - b)
      return snprintf(why, cap, "iris_heap_offset of offset %lu gives %zu", (unsigned long)(p - b), off), 1;
    used += sz;
  }
  if (iris_heap_used(ctx) != used) return snprintf(why, cap, "iris_heap_used %zu, live blocks (rounded to 256) %zu", iris_heap_used(ctx), used), 1;
  return 0;
}

/* A seeded sequence of mallocs and frees; records each op's resulting offset
 * (SIZE_MAX for a failure) and checks the invariants after every op. Returns the
 * number of invariant violations (first reason in why). */
#define NOPS 2000
static int random_ops(iris_t *ctx, void *base, size_t heap, uint64_t seed, size_t *offs, int *nooms, char *why, size_t cap) {
  live_t lv[512];
  int n = 0, op, bad = 0;
  rng_t rg;
  char w[300];
  rg.s = seed;
  *nooms = 0;
  for (op = 0; op < NOPS; op++) {
    uint64_t x = rng_next(&rg);
    if (n > 0 && (x % 3 == 0 || n == 400)) {
      int k = (int)((x >> 8) % (uint64_t)n);
      iris_status_t st = iris_free(ctx, lv[k].p);
      offs[op] = (size_t)((uintptr_t)lv[k].p - (uintptr_t)base) | ((size_t)1 << 62);
      if (st != IRIS_SUCCESS && !bad++) snprintf(why, cap, "op %d: iris_free: %s: %s", op, sname(st), iris_error_detail());
      lv[k] = lv[--n];
    } else {
      size_t bytes = 1 + (size_t)((x >> 8) % ((uint64_t)1 << ((x >> 40) % 21))); /* 1 B .. 1 MiB, log-spread */
      void *p = (void *)&rg;
      size_t used0 = iris_heap_used(ctx);
      iris_status_t st = iris_malloc(ctx, bytes, &p);
      if (st == IRIS_SUCCESS) {
        offs[op] = (size_t)((uintptr_t)p - (uintptr_t)base);
        lv[n].p = p;
        lv[n].bytes = bytes;
        n++;
      } else {
        offs[op] = SIZE_MAX;
        ++*nooms;
        if ((st != IRIS_ERROR_OUT_OF_MEMORY || p != NULL || iris_heap_used(ctx) != used0) && !bad++)
          snprintf(why, cap, "op %d: iris_malloc(%zu) failed with %s, ptr %p, used %zu -> %zu", op, bytes, sname(st), p, used0, iris_heap_used(ctx));
      }
    }
    if (heap_invariants(ctx, base, heap, lv, n, w, sizeof w) && !bad++) snprintf(why, cap, "after op %d: %s", op, w);
  }
  while (n > 0) {
    iris_status_t st = iris_free(ctx, lv[--n].p);
    if (st != IRIS_SUCCESS && !bad++) snprintf(why, cap, "final free: %s", sname(st));
  }
  if (iris_heap_used(ctx) != 0 && !bad++) snprintf(why, cap, "%zu bytes still used after freeing everything", iris_heap_used(ctx));
  return bad;
}

static void test_alloc_random(void) {
  const size_t heap = (size_t)8 << 20;
  void *base_b = (void *)(uintptr_t)0x7f0000000000ULL;
  static size_t offs_a[NOPS], offs_b[NOPS], offs_c[NOPS];
  iris_t *a = iris_detail_host_only_ctx(heap, FAKE_BASE), *b = iris_detail_host_only_ctx(heap, base_b), *c = iris_detail_host_only_ctx(heap, FAKE_BASE);
  char why_a[400] = "", why_b[400] = "", why_c[400] = "";
  int bad_a, bad_b, bad_c, ooms_a, ooms_b, ooms_c, i, first_diff = -1, ndiff = 0;
  void *p = NULL;
  if (!a || !b || !c) {
    check(0, "allocator random invariants", "iris_detail_host_only_ctx returned NULL");
    iris_detail_host_only_free(a);
    iris_detail_host_only_free(b);
    iris_detail_host_only_free(c);
    return;
  }
  bad_a = random_ops(a, FAKE_BASE, heap, 12345, offs_a, &ooms_a, why_a, sizeof why_a);
  bad_b = random_ops(b, base_b, heap, 12345, offs_b, &ooms_b, why_b, sizeof why_b);
  bad_c = random_ops(c, FAKE_BASE, heap, 54321, offs_c, &ooms_c, why_c, sizeof why_c);
  check(!bad_a && !bad_b && !bad_c, "allocator random invariants", "%d/%d/%d violations: %s %s %s", bad_a, bad_b, bad_c, why_a, why_b, why_c);
  for (i = 0; i < NOPS; i++)
    if (offs_a[i] != offs_b[i]) {
      if (first_diff < 0) first_diff = i;
      ndiff++;
    }
  check(ndiff == 0 && ooms_a == ooms_b, "allocator deterministic offsets", "%d of %d ops differ (first at op %d: %zu vs %zu), ooms %d vs %d", ndiff, NOPS,
        first_diff, first_diff >= 0 ? offs_a[first_diff] : 0, first_diff >= 0 ? offs_b[first_diff] : 0, ooms_a, ooms_b);
  for (ndiff = 0, i = 0; i < NOPS; i++) ndiff += offs_a[i] != offs_c[i];
  check(ndiff > 0, "allocator different sequence detected", "a different seed gave the very same %d offsets", NOPS);
  /* after everything was freed the whole heap is one block again, on both */
  check(iris_malloc(a, heap, &p) == IRIS_SUCCESS && p == FAKE_BASE && iris_free(a, p) == IRIS_SUCCESS, "allocator random coalesces",
        "full-heap malloc after the sequence: ptr %p, '%s'", p, iris_error_detail());
  iris_detail_host_only_free(a);
  iris_detail_host_only_free(b);
  iris_detail_host_only_free(c);
}

static void test_alloc_alignment(void) {
  const size_t heap = (size_t)16 << 20;
  iris_t *ctx = iris_detail_host_only_ctx(heap, FAKE_BASE);
  void *p1 = NULL, *pa = NULL, *pb = NULL, *pc = NULL, *bad = NULL;
  iris_status_t s1, sa, sb, sc, st;
  uintptr_t b = (uintptr_t)FAKE_BASE;
  size_t npot[] = {3, 100, 384, 1000, 4097, (size_t)3 << 20};
  unsigned i;
  char why[300];
  live_t lv[4];
  if (!ctx) {
    check(0, "allocator alignment 256", "iris_detail_host_only_ctx returned NULL");
    return;
  }
  s1 = iris_malloc(ctx, 1, &p1);
  sa = iris_malloc_aligned(ctx, 100, 4096, &pa);
  sb = iris_malloc_aligned(ctx, 100, (size_t)1 << 20, &pb);
  sc = iris_malloc(ctx, 300, &pc);
  check(s1 == IRIS_SUCCESS && sc == IRIS_SUCCESS && ((uintptr_t)p1 - b) % 256 == 0 && (uintptr_t)p1 % 256 == 0 && ((uintptr_t)pc - b) % 256 == 0 &&
            (uintptr_t)pc % 256 == 0,
        "allocator alignment 256", "malloc: %s %s, offsets %lu %lu", sname(s1), sname(sc), (unsigned long)((uintptr_t)p1 - b), (unsigned long)((uintptr_t)pc - b));
  check(sa == IRIS_SUCCESS && ((uintptr_t)pa - b) % 4096 == 0 && (uintptr_t)pa % 4096 == 0, "allocator alignment 4096", "%s, offset %lu", sname(sa),
        (unsigned long)((uintptr_t)pa - b));
  check(sb == IRIS_SUCCESS && ((uintptr_t)pb - b) % ((size_t)1 << 20) == 0 && (uintptr_t)pb % ((size_t)1 << 20) == 0 && pb != FAKE_BASE, "allocator alignment 1 MiB",
        "%s, offset %lu", sname(sb), (unsigned long)((uintptr_t)pb - b));
  lv[0].p = p1, lv[0].bytes = 1;
  lv[1].p = pa, lv[1].bytes = 100;
  lv[2].p = pb, lv[2].bytes = 100;
  lv[3].p = pc, lv[3].bytes = 300;
  check(s1 == IRIS_SUCCESS && sa == IRIS_SUCCESS && sb == IRIS_SUCCESS && sc == IRIS_SUCCESS && !heap_invariants(ctx, FAKE_BASE, heap, lv, 4, why, sizeof why),
        "allocator aligned blocks accounting", "%s", why);
  for (i = 0; i < sizeof npot / sizeof npot[0]; i++) {
    char nm[64];
    size_t used0 = iris_heap_used(ctx);
    bad = (void *)ctx;
    st = iris_malloc_aligned(ctx, 64, npot[i], &bad);
    snprintf(nm, sizeof nm, "allocator alignment %zu refused", npot[i]);
    check(st == IRIS_ERROR_INVALID_ARGUMENT && bad == NULL && iris_heap_used(ctx) == used0, nm, "status %s, ptr %p, used %zu -> %zu", sname(st), bad, used0,
          iris_heap_used(ctx));
  }
  bad = (void *)ctx;
  st = iris_malloc(ctx, 0, &bad);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && bad == NULL, "allocator zero bytes refused", "status %s, ptr %p", sname(st), bad);
  bad = (void *)ctx;
  st = iris_malloc_aligned(ctx, 0, 4096, &bad);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && bad == NULL, "allocator aligned zero bytes refused", "status %s, ptr %p", sname(st), bad);
  /* free everything; the alignment padding must merge back into one block */
  st = iris_free(ctx, pb);
  if (st == IRIS_SUCCESS) st = iris_free(ctx, p1);
  if (st == IRIS_SUCCESS) st = iris_free(ctx, pc);
  if (st == IRIS_SUCCESS) st = iris_free(ctx, pa);
  bad = NULL;
  s1 = iris_malloc(ctx, heap, &bad);
  check(st == IRIS_SUCCESS && iris_heap_used(ctx) == heap && s1 == IRIS_SUCCESS && bad == FAKE_BASE && iris_free(ctx, bad) == IRIS_SUCCESS && iris_heap_used(ctx) == 0,
        "allocator aligned padding coalesces", "frees %s, full-heap malloc %s at %p, used %zu", sname(st), sname(s1), bad, iris_heap_used(ctx));
  iris_detail_host_only_free(ctx);
}

/* iris_malloc_aligned above the heap base's 2 MiB alignment: the offset is aligned (the same
 * on every rank, whatever its base), the pointer only as far as the base is; 0 is the
 * default alignment (iris.h). */
static void test_alloc_alignment_offset(void) {
  const size_t heap = (size_t)16 << 20;
  void *base = (void *)((uintptr_t)FAKE_BASE + ((size_t)2 << 20)); /* 2 MiB-aligned, not 4 MiB */
  iris_t *ctx = iris_detail_host_only_ctx(heap, base);
  void *p1 = NULL, *p4 = NULL, *p0 = NULL;
  iris_status_t s1, s4, s0;
  if (!ctx) {
    check(0, "allocator alignment 4 MiB aligns the offset", "iris_detail_host_only_ctx returned NULL");
    return;
  }
  s1 = iris_malloc(ctx, 1, &p1);
  s4 = iris_malloc_aligned(ctx, 100, (size_t)4 << 20, &p4);
  s0 = iris_malloc_aligned(ctx, 100, 0, &p0);
  check(s1 == IRIS_SUCCESS && s4 == IRIS_SUCCESS && ((uintptr_t)p4 - (uintptr_t)base) == ((size_t)4 << 20) && (uintptr_t)p4 % ((size_t)2 << 20) == 0,
        "allocator alignment 4 MiB aligns the offset (the pointer as far as the 2 MiB base)", "%s %s, offset %lu", sname(s1), sname(s4),
        (unsigned long)((uintptr_t)p4 - (uintptr_t)base));
  check(s0 == IRIS_SUCCESS && ((uintptr_t)p0 - (uintptr_t)base) % IRIS_HEAP_ALIGN == 0, "allocator alignment 0 is IRIS_HEAP_ALIGN", "%s, offset %lu", sname(s0),
        (unsigned long)((uintptr_t)p0 - (uintptr_t)base));
  iris_detail_host_only_free(ctx);
}

static void test_alloc_exhaustion(void) {
  const size_t heap = (size_t)1 << 20, req = 3000, blk = ROUND256(req);
  const int expect_n = (int)(heap / blk);
  static void *ptrs[1200];
  iris_t *ctx = iris_detail_host_only_ctx(heap, FAKE_BASE);
  int n = 0, i, ok;
  iris_status_t st = IRIS_SUCCESS;
  size_t used_before, used_after;
  void *p;
  char detail[1024];
  rng_t rg;
  if (!ctx) {
    check(0, "allocator exhaustion count", "iris_detail_host_only_ctx returned NULL");
    return;
  }
  while (n < 1200) {
    p = NULL;
    used_before = iris_heap_used(ctx);
    st = iris_malloc(ctx, req, &p);
    if (st != IRIS_SUCCESS) break;
    ptrs[n++] = p;
  }
  snprintf(detail, sizeof detail, "%s", iris_error_detail());
  used_after = iris_heap_used(ctx);
  check(st == IRIS_ERROR_OUT_OF_MEMORY && n == expect_n && used_after == (size_t)n * blk, "allocator exhaustion count",
        "%d blocks of %zu bytes before %s (want %d = %zu / %zu), used %zu", n, req, sname(st), expect_n, heap, blk, used_after);
  check(st == IRIS_ERROR_OUT_OF_MEMORY && p == NULL && used_after == used_before && has(detail, "exhausted"), "allocator exhaustion leaves heap unchanged",
        "ptr %p (want NULL), used %zu -> %zu, detail '%s'", p, used_before, used_after, detail);
  /* the tail (heap - n*blk bytes) is still usable, then nothing is */
  {
    size_t tail = heap - (size_t)n * blk;
    void *t = NULL, *u = (void *)ctx;
    iris_status_t s1 = tail ? iris_malloc(ctx, tail, &t) : IRIS_SUCCESS, s2 = iris_malloc(ctx, 1, &u);
    check(s1 == IRIS_SUCCESS && s2 == IRIS_ERROR_OUT_OF_MEMORY && u == NULL && iris_heap_used(ctx) == heap, "allocator exhaustion tail",
          "tail of %zu: %s; then 1 byte: %s, ptr %p, used %zu", tail, sname(s1), sname(s2), u, iris_heap_used(ctx));
    if (t) ptrs[n++] = t;
  }
  /* free one block in the middle: an allocation of that size fits again, there */
  {
    int k = expect_n / 2;
    void *q = NULL, *old = ptrs[k];
    iris_status_t s1 = iris_free(ctx, old), s2 = iris_malloc(ctx, req, &q);
    check(s1 == IRIS_SUCCESS && s2 == IRIS_SUCCESS && q == old, "allocator usable after exhaustion", "free %s, malloc %s at %p (the freed block was %p)", sname(s1),
          sname(s2), q, old);
    if (q) ptrs[k] = q;
  }
  /* fragmentation: every other block free; a 2-block request must not fit */
  {
    void *q = (void *)ctx;
    iris_status_t s2;
    size_t used0;
    ok = 1;
    for (i = 0; i < expect_n; i += 2) ok &= iris_free(ctx, ptrs[i]) == IRIS_SUCCESS;
    used0 = iris_heap_used(ctx);
    s2 = iris_malloc(ctx, 2 * blk, &q);
    check(ok && s2 == IRIS_ERROR_OUT_OF_MEMORY && q == NULL && used0 == heap - (size_t)((expect_n + 1) / 2) * blk, "allocator no false coalescing",
          "frees ok %d, %zu-byte malloc into a heap of free %zu-byte holes gave %s at %p, used %zu", ok, 2 * blk, blk, sname(s2), q, used0);
    for (i = 0; i < expect_n; i += 2) ptrs[i] = NULL;
  }
  /* free the rest in random order: the heap is one block again */
  {
    void *q = NULL;
    iris_status_t s2;
    rg.s = 777;
    for (i = n - 1; i > 0; i--) {
      int j = (int)(rng_next(&rg) % (uint64_t)(i + 1));
      void *tmp = ptrs[i];
      ptrs[i] = ptrs[j];
      ptrs[j] = tmp;
    }
    ok = 1;
    for (i = 0; i < n; i++)
      if (ptrs[i]) ok &= iris_free(ctx, ptrs[i]) == IRIS_SUCCESS;
    s2 = iris_malloc(ctx, heap, &q);
    check(ok && s2 == IRIS_SUCCESS && q == FAKE_BASE && iris_heap_used(ctx) == heap, "allocator full heap after freeing all",
          "frees ok %d, full-heap malloc %s at %p, used %zu: '%s'", ok, sname(s2), q, iris_heap_used(ctx), iris_error_detail());
    if (q) iris_free(ctx, q);
  }
  {
    void *q = (void *)ctx;
    st = iris_malloc(ctx, heap + 1, &q);
    char largest[64];
    snprintf(largest, sizeof largest, "largest free block %zu", heap);
    check(st == IRIS_ERROR_OUT_OF_MEMORY && q == NULL && iris_heap_used(ctx) == 0 && has(iris_error_detail(), "exhausted") && has(iris_error_detail(), largest),
          "allocator larger than heap", "%s, ptr %p, used %zu, '%s' (want '%s')", sname(st), q, iris_heap_used(ctx), iris_error_detail(), largest);
  }
  iris_detail_host_only_free(ctx);
}

static void test_alloc_errors(void) {
  const size_t heap = (size_t)4 << 20;
  iris_t *ctx = iris_detail_host_only_ctx(heap, FAKE_BASE);
  char *base = (char *)FAKE_BASE;
  void *p = NULL, *q = NULL, *out;
  size_t off = 12345, used0;
  iris_status_t s1, s2, s3, s4, s5;
  iris_device_ctx_t dc;
  if (!ctx) {
    check(0, "allocator free outside heap", "iris_detail_host_only_ctx returned NULL");
    return;
  }
  s1 = iris_malloc(ctx, 1024, &p);
  s2 = iris_malloc(ctx, 1024, &q);
  if (s1 != IRIS_SUCCESS || s2 != IRIS_SUCCESS) {
    check(0, "allocator free outside heap", "setup mallocs failed: %s %s", sname(s1), sname(s2));
    iris_detail_host_only_free(ctx);
    return;
  }
  used0 = iris_heap_used(ctx);
  s1 = iris_free(ctx, base - 256);
  s2 = iris_free(ctx, base + heap);
  s3 = iris_free(ctx, base + heap + 4096);
  check(s1 == IRIS_ERROR_NOT_IN_HEAP && s2 == IRIS_ERROR_NOT_IN_HEAP && s3 == IRIS_ERROR_NOT_IN_HEAP && iris_heap_used(ctx) == used0, "allocator free outside heap",
        "base-256: %s, base+heap: %s, base+heap+4096: %s", sname(s1), sname(s2), sname(s3));
  s1 = iris_free(ctx, (char *)p + 256);
  s2 = iris_free(ctx, (char *)p + 1);
  s3 = iris_free(ctx, base + heap / 2); /* start of nothing: inside the free tail */
  check(s1 == IRIS_ERROR_INVALID_ARGUMENT && s2 == IRIS_ERROR_INVALID_ARGUMENT && s3 == IRIS_ERROR_INVALID_ARGUMENT && iris_heap_used(ctx) == used0,
        "allocator free not a block start", "p+256: %s, p+1: %s, mid-heap: %s, used %zu -> %zu", sname(s1), sname(s2), sname(s3), used0, iris_heap_used(ctx));
  s1 = iris_free(ctx, p);
  used0 = iris_heap_used(ctx);
  s2 = iris_free(ctx, p);
  check(s1 == IRIS_SUCCESS && s2 == IRIS_ERROR_INVALID_ARGUMENT && iris_heap_used(ctx) == used0 && used0 == ROUND256(1024), "allocator double free",
        "first free %s, second %s, used %zu", sname(s1), sname(s2), iris_heap_used(ctx));
  s1 = iris_free(ctx, NULL);
  check(s1 == IRIS_SUCCESS, "allocator free null", "iris_free(ctx, NULL) gave %s", sname(s1));
  s1 = iris_free(NULL, q);
  s2 = iris_malloc(NULL, 16, &out);
  s3 = iris_malloc(ctx, 16, NULL);
  s4 = iris_heap_offset(ctx, q, NULL);
  s5 = iris_heap_offset(NULL, q, &off);
  check(s1 == IRIS_ERROR_INVALID_ARGUMENT && s2 == IRIS_ERROR_INVALID_ARGUMENT && s3 == IRIS_ERROR_INVALID_ARGUMENT && s4 == IRIS_ERROR_INVALID_ARGUMENT &&
            s5 == IRIS_ERROR_INVALID_ARGUMENT,
        "allocator null arguments", "free(NULL ctx) %s, malloc(NULL ctx) %s, malloc(NULL ptr) %s, offset(NULL out) %s, offset(NULL ctx) %s", sname(s1), sname(s2),
        sname(s3), sname(s4), sname(s5));
  off = 12345;
  s1 = iris_heap_offset(ctx, base - 1, &off);
  s2 = iris_heap_offset(ctx, base + heap, &off);
  check(s1 == IRIS_ERROR_NOT_IN_HEAP && s2 == IRIS_ERROR_NOT_IN_HEAP && off == 12345, "allocator offset outside heap", "base-1: %s, base+heap: %s", sname(s1),
        sname(s2));
  s1 = iris_heap_offset(ctx, q, &off);
  s2 = iris_heap_offset(ctx, base + heap - 1, &off);
  check(s1 == IRIS_SUCCESS && s2 == IRIS_SUCCESS && off == heap - 1, "allocator offset inside heap", "%s %s, last byte's offset %zu", sname(s1), sname(s2), off);
  out = NULL;
  s1 = iris_translate_host(ctx, q, 1, &out);
  s2 = iris_translate_host(ctx, q, -1, &out);
  check(s1 == IRIS_ERROR_INVALID_RANK && s2 == IRIS_ERROR_INVALID_RANK && out == NULL, "allocator translate bad rank", "rank 1: %s, rank -1: %s", sname(s1), sname(s2));
  s1 = iris_translate_host(ctx, q, 0, &out);
  s2 = iris_translate_host(ctx, base - 8, 0, &out);
  check(s1 == IRIS_SUCCESS && out == q && s2 == IRIS_ERROR_NOT_IN_HEAP, "allocator translate own rank", "%s (ptr %p vs %p), outside: %s", sname(s1), out, q,
        sname(s2));
  dc = iris_device_context(ctx);
  check(iris_rank(ctx) == 0 && iris_world_size(ctx) == 1 && iris_heap_size(ctx) == heap && iris_heap_base(ctx, 0) == FAKE_BASE && iris_heap_base(ctx, 1) == NULL &&
            iris_heap_base(ctx, -1) == NULL && dc.rank == 0 && dc.world_size == 1 && dc.heap_size == heap && dc.bases[0] == base && dc.bases[1] == NULL,
        "allocator context queries", "rank %d world %d heap %zu base0 %p base1 %p; device ctx rank %d world %d heap %llu base0 %p", iris_rank(ctx),
        iris_world_size(ctx), iris_heap_size(ctx), iris_heap_base(ctx, 0), iris_heap_base(ctx, 1), dc.rank, dc.world_size, dc.heap_size, (void *)dc.bases[0]);
  dc = iris_device_context(NULL);
  check(iris_rank(NULL) == -1 && iris_world_size(NULL) == 0 && iris_heap_size(NULL) == 0 && iris_heap_used(NULL) == 0 && iris_heap_base(NULL, 0) == NULL &&
            dc.world_size == 0 && dc.bases[0] == NULL,
        "queries on null context", "rank %d world %d heap %zu", iris_rank(NULL), iris_world_size(NULL), iris_heap_size(NULL));
  iris_free(ctx, q);
  iris_detail_host_only_free(ctx);
}
