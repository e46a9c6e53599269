/* nccl/shim.cc — libiris_nccl.so (make lib-nccl): NCCL's API, served by iris where iris is
 * faster and by the real NCCL everywhere else (docs/nccl_shim.md).
 *
 * What it is
 *   A library with soname libnccl.so.2 that exports every function of the nccl.h it was
 *   built against (tools/gen_nccl_shim.py generates the forwarding stubs and the pnccl*
 *   aliases). The real NCCL is opened with dlopen (RTLD_LOCAL | RTLD_DEEPBIND, so its own
 *   calls never land in this library). The ncclComm_t a program sees is the real
 *   communicator itself; beside it the shim keeps a record (iris_nccl_comm_t, found by the
 *   pointer) holding an iris context when one could be brought up. Every call the shim
 *   does not serve goes to the real NCCL unchanged.
 *
 * Bring-up (per communicator, after the real one is ready)
 *   Every rank sends a record (route.h) over the real communicator (ncclAllGather); all
 *   draw the same verdict from all records: iris when the ranks are on one host, one GPU
 *   each (sm_90+), 2..IRIS_MAX_RANKS of them, with the same settings. Then iris_init in
 *   mode 2, its bootstrap callbacks again ncclAllGather over the real communicator (no
 *   other rendezvous), iris_collectives_setup, and one more exchange so that all ranks
 *   keep the context or all drop it. Communicators created inside ncclGroupStart/End
 *   are brought up at the outermost ncclGroupEnd, one helper thread per communicator when
 *   one thread created several (each bring-up blocks in its exchanges).
 *
 * Calls
 *   ncclAllReduce, ncclAllGather, ncclReduceScatter, ncclBroadcast / ncclBcast and
 *   ncclAlltoAll go to iris when route.h says so (the rule that keeps every rank on the
 *   same side is written there); iris enqueues on the caller's stream and records no host
 *   synchronisation, so calls are capturable in CUDA graphs. Everything else forwards.
 *
 * Memory (IRIS_NCCL_MEMALLOC; docs/nccl_shim.md, "Memory")
 *   ncclMemAlloc lends blocks of the oldest iris heap on the caller's GPU (else the real
 *   NCCL's); ncclCommWindowRegister exchanges where every rank's buffer lies and keeps
 *   windows over that memory itself, zero-copy when every rank's buffer sits at the same
 *   heap offset; calls on anything else pass IRIS_COLL_STAGE (staged, heap or not).
 *
 * Teardown
 *   ncclCommFinalize / ncclCommDestroy finalize the iris context first (the ranks meet once
 *   over the real communicator, bounded by IRIS_BARRIER_TIMEOUT_MS and ended by an
 *   ncclCommAbort in another thread; then each frees its context locally), then forward; where every rank of the communicator
 *   lives in this process, as NCCL the last of them to leave frees them all
 *   (iris_nccl_teardown). ncclCommAbort and ncclCommRevoke
 *   stop iris's kernels (iris_abort) and forward; an aborted context is left mapped
 *   until the process exits, because finalizing it would wait for the whole GPU, which
 *   may hold NCCL kernels of other communicators that wait on a dead peer.
 *
 * Errors
 *   Results are NCCL's codes; a call iris failed sets this thread's ncclGetLastError text
 *   (iris's detail: which call, which rank, why); any failed forwarded call gives the
 *   text back to the real NCCL. Library code never exits, aborts or throws. */
#include <nccl.h>
#include <nccl_device.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "../iris.h"
#include "../iris_collectives.h"
#include "iris_nccl.h"
#include "route.h"

#define IRIS_NCCL_EXPORT __attribute__((visibility("default")))
static void *iris_nccl_real_fn(int id);
static ncclResult_t iris_nccl_missing(int id);
static ncclResult_t iris_nccl_forwarded(ncclResult_t r);
static const char *iris_nccl_unavailable_text(void);
#define IRIS_NCCL_GEN_DECLS
#include "nccl_shim_gen.h"
/* the real function `name`, typed; NULL when the real NCCL lacks it (or none was found) */
#define IRIS_NCCL_REAL(name) ((iris_nccl_fn_##name##_t)iris_nccl_real_fn(IRIS_NCCL_FN_##name))

static_assert(IRIS_NCCL_KINDS == IRIS_NCCL_STATS_KINDS, "iris_nccl.h counts the collectives of route.h");

/* ====================================================================== errors == */
/* This thread's last error of the shim's own making; ncclGetLastError returns it while
 * iris_nccl_err_mine is set, and the real NCCL's text after a forwarded call failed. */
static __thread char iris_nccl_err[1536];
static __thread int iris_nccl_err_mine;
static int iris_nccl_debug_level(void);

static void iris_nccl_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void iris_nccl_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(iris_nccl_err, sizeof iris_nccl_err, fmt, ap);
  va_end(ap);
  iris_nccl_err_mine = 1;
  if (iris_nccl_debug_level() > 0) fprintf(stderr, "iris_nccl: error: %s\n", iris_nccl_err);
}
static ncclResult_t iris_nccl_forwarded(ncclResult_t r) {
  if (r != ncclSuccess && r != ncclInProgress) iris_nccl_err_mine = 0; /* the real NCCL's text is the newer one */
  return r;
}
static __attribute__((unused)) const char *iris_nccl_unavailable_text(void) { return iris_nccl_err; }

/* ===================================================== the real NCCL (dlopen) == */
static pthread_once_t iris_nccl_load_ctl = PTHREAD_ONCE_INIT;
static void *iris_nccl_lib;
static char iris_nccl_lib_path[PATH_MAX];
static char iris_nccl_load_error[1400];
static void *iris_nccl_fns[IRIS_NCCL_FN_COUNT];

static void iris_nccl_append(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void iris_nccl_append(char *buf, size_t n, const char *fmt, ...) {
  size_t used = strlen(buf);
  va_list ap;
  if (used + 1 >= n) return;
  va_start(ap, fmt);
  vsnprintf(buf + used, n - used, fmt, ap);
  va_end(ap);
}

/* Open one candidate; NULL (and a note in `tried`) unless it is a real NCCL: not this
 * file, not another copy of the shim, and it has ncclGetVersion. */
static void *iris_nccl_try_open(const char *path, const struct stat *self, char *tried, size_t n) {
  struct stat st;
  void *h;
  if (stat(path, &st) != 0) return NULL; /* absent: not worth a mention */
  if (self && st.st_dev == self->st_dev && st.st_ino == self->st_ino) {
    iris_nccl_append(tried, n, " %s (this shim);", path);
    return NULL;
  }
  if (!(h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND))) {
    const char *e = dlerror();
    iris_nccl_append(tried, n, " %s (%s);", path, e ? e : "dlopen failed");
    return NULL;
  }
  if (dlsym(h, "iris_nccl_stats")) {
    dlclose(h);
    iris_nccl_append(tried, n, " %s (another copy of the shim);", path);
    return NULL;
  }
  if (!dlsym(h, "ncclGetVersion")) {
    dlclose(h);
    iris_nccl_append(tried, n, " %s (no ncclGetVersion: not NCCL);", path);
    return NULL;
  }
  return h;
}

/* The nvidia-nccl wheel beside the other NVIDIA wheels this process has loaded (torch
 * and jaxlib load libcudart, libcublas, ... from <site-packages>/nvidia/<name>/lib before
 * their first NCCL call): <site-packages>/nvidia/nccl/lib, the NCCL they were built for,
 * which the preloaded shim kept from loading. Appends "<dir>:" for each one found. */
static void iris_nccl_wheel_dirs(char *dirs, size_t n) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096], seen[2048] = "", dir[PATH_MAX], probe[PATH_MAX + 32];
  struct stat st;
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    char *path = strchr(line, '/'), *nv;
    if (!path || !(nv = strstr(path, "/nvidia/"))) continue;
    snprintf(dir, sizeof dir, "%.*s/nvidia/nccl/lib", (int)(nv - path), path);
    if (strstr(seen, dir)) continue;
    iris_nccl_append(seen, sizeof seen, "%s:", dir);
    snprintf(probe, sizeof probe, "%s/libnccl.so.2", dir);
    if (stat(probe, &st) == 0) iris_nccl_append(dirs, n, "%s:", dir);
  }
  fclose(f);
}

/* IRIS_NCCL_LIB when set (that file and no other; set but empty: no NCCL); else the first libnccl.so.2 other
 * than this library in: the nvidia-nccl wheel beside NVIDIA wheels already loaded, the
 * directories of LD_LIBRARY_PATH, this library's directory, $CUDA_HOME/lib64,
 * /usr/local/cuda/lib64 and the system's library directories. */
static void iris_nccl_load(void) {
  static const char *const fixed[] = {"/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"};
  struct stat self_st, *self = NULL;
  Dl_info info;
  char tried[1024] = "", dirs[8192] = "", path[PATH_MAX];
  const char *env = getenv("IRIS_NCCL_LIB"), *d;
  size_t i;
  void *h = NULL;
  if (dladdr((void *)&iris_nccl_load, &info) && info.dli_fname && stat(info.dli_fname, &self_st) == 0) self = &self_st;
  if (env && !*env) { /* set but empty: an error, as every IRIS_* variable (not "search") */
    snprintf(iris_nccl_load_error, sizeof iris_nccl_load_error,
             "iris_nccl: IRIS_NCCL_LIB is set but empty; unset it to search for the real NCCL, or give the path of its libnccl.so.2");
    return;
  }
  if (env) {
    if (!(h = iris_nccl_try_open(env, self, tried, sizeof tried))) {
      snprintf(iris_nccl_load_error, sizeof iris_nccl_load_error, "iris_nccl: IRIS_NCCL_LIB=%s is not a usable NCCL:%s", env,
               tried[0] ? tried : " no such file");
      return;
    }
    snprintf(iris_nccl_lib_path, sizeof iris_nccl_lib_path, "%s", env);
  } else {
    /* the candidate directories, ':'-separated, in order */
    iris_nccl_wheel_dirs(dirs, sizeof dirs);
    if ((d = getenv("LD_LIBRARY_PATH")) != NULL) iris_nccl_append(dirs, sizeof dirs, "%s:", d);
    if (self && info.dli_fname && strrchr(info.dli_fname, '/'))
      iris_nccl_append(dirs, sizeof dirs, "%.*s:", (int)(strrchr(info.dli_fname, '/') - info.dli_fname), info.dli_fname);
    if ((d = getenv("CUDA_HOME")) != NULL && *d) iris_nccl_append(dirs, sizeof dirs, "%s/lib64:", d);
    for (i = 0; i < sizeof fixed / sizeof fixed[0]; i++) iris_nccl_append(dirs, sizeof dirs, "%s:", fixed[i]);
    for (d = dirs; *d && !h;) {
      const char *end = strchr(d, ':');
      size_t len = end ? (size_t)(end - d) : strlen(d);
      if (len > 0 && len + 16 < sizeof path) {
        snprintf(path, sizeof path, "%.*s/libnccl.so.2", (int)len, d);
        if ((h = iris_nccl_try_open(path, self, tried, sizeof tried)) != NULL) snprintf(iris_nccl_lib_path, sizeof iris_nccl_lib_path, "%s", path);
      }
      d += len + (end ? 1 : 0);
    }
    if (!h) {
      snprintf(iris_nccl_load_error, sizeof iris_nccl_load_error,
               "iris_nccl: found no real NCCL (a libnccl.so.2 other than this shim) in an nvidia-nccl wheel, LD_LIBRARY_PATH, this library's "
               "directory, $CUDA_HOME/lib64, /usr/local/cuda/lib64 or the system library directories;%s set IRIS_NCCL_LIB to its path",
               tried[0] ? tried : "");
      return;
    }
  }
  iris_nccl_lib = h;
}

static void *iris_nccl_real_fn(int id) {
  void *f = __atomic_load_n(&iris_nccl_fns[id], __ATOMIC_ACQUIRE);
  if (f) return f;
  pthread_once(&iris_nccl_load_ctl, iris_nccl_load);
  if (!iris_nccl_lib) return NULL;
  if ((f = dlsym(iris_nccl_lib, iris_nccl_fn_names[id])) != NULL) __atomic_store_n(&iris_nccl_fns[id], f, __ATOMIC_RELEASE);
  return f;
}

/* A call the real NCCL cannot take: none was found (ncclSystemError), or it lacks the
 * function (ncclInvalidUsage: it is older than the nccl.h the shim was built against). */
static ncclResult_t iris_nccl_missing(int id) {
  pthread_once(&iris_nccl_load_ctl, iris_nccl_load);
  if (!iris_nccl_lib) {
    iris_nccl_set_error("%s (%s was called)", iris_nccl_load_error, iris_nccl_fn_names[id]);
    return ncclSystemError;
  }
  iris_nccl_set_error("iris_nccl: %s: the real NCCL (%s) has no such function; it is older than the nccl.h this shim was built against", iris_nccl_fn_names[id],
                      iris_nccl_lib_path);
  return ncclInvalidUsage;
}

extern "C" IRIS_NCCL_EXPORT const char *iris_nccl_real_library(void) {
  pthread_once(&iris_nccl_load_ctl, iris_nccl_load);
  if (!iris_nccl_lib) {
    iris_nccl_set_error("%s", iris_nccl_load_error);
    return NULL;
  }
  return iris_nccl_lib_path;
}

/* ================================================================== settings == */
/* Read once per process from the environment (docs/nccl_shim.md lists them). They must be
 * alike on every rank, as NCCL's own variables: the bring-up compares the ones that
 * decide routing and refuses iris where they differ. */
typedef struct iris_nccl_options {
  int disable;         /* IRIS_NCCL_DISABLE: no iris at all, every call forwards, no bring-up */
  int debug;           /* IRIS_NCCL_DEBUG: 1 rank 0 of each communicator, 2 every rank */
  int groups;          /* IRIS_NCCL_GROUPS: 0 sends every call inside a group to NCCL */
  iris_nccl_table_t table;
  int bad;             /* a malformed variable: no communicator gets iris (why says which) */
  char why[320];
  unsigned long long heap;    /* IRIS_NCCL_HEAP, 0: sized per communicator */
  unsigned long long memalloc; /* IRIS_NCCL_MEMALLOC: heap bytes added for ncclMemAlloc, 0: ncclMemAlloc forwards */
  unsigned long long staging; /* the staging bytes iris will use (for the heap size) */
  char staging_str[32];       /* IRIS_COLL_STAGING as iris will read it */
  int set_staging;            /* 1: the shim sets IRIS_COLL_STAGING around iris_collectives_setup */
  int barrier_ms;             /* the teardown's meeting waits at most this long: iris's barrier bound (IRIS_BARRIER_TIMEOUT_MS, else 600 s) */
} iris_nccl_options_t;
static iris_nccl_options_t iris_nccl_opt;
static pthread_once_t iris_nccl_opt_ctl = PTHREAD_ONCE_INIT;

static void iris_nccl_read_options(void) {
  iris_nccl_options_t *o = &iris_nccl_opt;
  const char *v;
  o->groups = 1;
  { /* the switches: 0 or 1 (IRIS_NCCL_DEBUG: 0 to 2); a malformed one is refused like a
     * malformed size, not read as something else ("off" is not 0) */
    static const char *const names[3] = {"IRIS_NCCL_DISABLE", "IRIS_NCCL_GROUPS", "IRIS_NCCL_DEBUG"};
    int *const dst[3] = {&o->disable, &o->groups, &o->debug};
    int i;
    for (i = 0; i < 3 && !o->bad; i++)
      if (iris_nccl_parse_level(v = getenv(names[i]), i == 2 ? 2 : 1, dst[i]) != 0) {
        snprintf(o->why, sizeof o->why, "%s='%s' is not %s%s", names[i], v, i == 2 ? "0, 1 or 2" : "0 or 1", *v ? "" : " (set but empty: unset it for the default)");
        o->bad = 1;
      }
  }
  if (!o->bad && iris_nccl_parse_table(getenv("IRIS_NCCL_MAX_BYTES"), &o->table, o->why, sizeof o->why) != 0) o->bad = 1;
  if (!o->bad && (v = getenv("IRIS_NCCL_HEAP")) != NULL && (iris_nccl_parse_size(v, &o->heap) != 0 || o->heap == 0)) {
    snprintf(o->why, sizeof o->why, "IRIS_NCCL_HEAP='%s' is not a size of bytes (e.g. 256M)", v);
    o->bad = 1;
  }
  if (!o->bad && (v = getenv("IRIS_NCCL_MEMALLOC")) != NULL && iris_nccl_parse_size(v, &o->memalloc) != 0) {
    snprintf(o->why, sizeof o->why, "IRIS_NCCL_MEMALLOC='%s' is not a size of bytes (e.g. 1G; 0: off)", v);
    o->bad = 1;
  }
  { /* IRIS_HOST_ID is iris's: set but empty is an error (iris_init refuses it), like a malformed variable here */
    char host[sizeof ((iris_nccl_record_t *)0)->host];
    if (!o->bad && iris_nccl_host_identity(host, sizeof host, o->why, sizeof o->why) != 0) o->bad = 1;
  }
  if ((v = getenv("IRIS_COLL_STAGING")) != NULL) { /* the user's; iris parses it (a bad one fails its setup) */
    snprintf(o->staging_str, sizeof o->staging_str, "%s", v);
    if (iris_nccl_parse_size(v, &o->staging) != 0 || o->staging == 0) o->staging = 64 * IRIS_NCCL_MIB;
  } else {
    { /* the largest limit of any world size's table (2 ranks' defaults are the largest) */
      const iris_nccl_table_t t2 = iris_nccl_table_for_world(&o->table, 2);
      o->staging = iris_nccl_staging_bytes(&t2);
    }
    snprintf(o->staging_str, sizeof o->staging_str, "%llu", o->staging);
    o->set_staging = 1;
  }
  o->barrier_ms = IRIS_DEFAULT_BARRIER_TIMEOUT_MS; /* a malformed IRIS_BARRIER_TIMEOUT_MS fails iris_init: no context to tear down */
  if ((v = getenv("IRIS_BARRIER_TIMEOUT_MS")) != NULL && *v) {
    char *end;
    long ms = strtol(v, &end, 10);
    if (!*end && ms >= 1 && ms <= INT_MAX) o->barrier_ms = (int)ms;
  }
  if (o->bad && !o->disable) fprintf(stderr, "iris_nccl: warning: %s; every communicator falls back to NCCL\n", o->why);
}
static const iris_nccl_options_t *iris_nccl_options(void) {
  pthread_once(&iris_nccl_opt_ctl, iris_nccl_read_options);
  return &iris_nccl_opt;
}
static int iris_nccl_debug_level(void) { return iris_nccl_options()->debug; }

/* iris reads IRIS_COLL_STAGING in iris_collectives_setup. When the user has not set it,
 * the shim sets it to the table's largest message while bring-ups run (iris's default,
 * 64 MiB twice per communicator, is far more than calls up to a few MiB need), and
 * removes it when the last one ends. Counted, since bring-ups run in several threads. */
static pthread_mutex_t iris_nccl_env_lock = PTHREAD_MUTEX_INITIALIZER;
static int iris_nccl_env_users;
static void iris_nccl_staging_env(int enter) {
  const iris_nccl_options_t *o = iris_nccl_options();
  if (!o->set_staging) return;
  pthread_mutex_lock(&iris_nccl_env_lock);
  if (enter && iris_nccl_env_users++ == 0) setenv("IRIS_COLL_STAGING", o->staging_str, 1);
  if (!enter && --iris_nccl_env_users == 0) unsetenv("IRIS_COLL_STAGING");
  pthread_mutex_unlock(&iris_nccl_env_lock);
}

/* ======================================================= communicator records == */
typedef struct iris_nccl_comm {
  ncclComm_t comm;       /* the real communicator: also the program's handle */
  int blocking;          /* non-blocking communicators get no iris context */
  int max_ctas;          /* before the bring-up: this rank's cap (ncclConfig_t.maxCTAs); after: the agreed one (iris_nccl_agreed_ctas), each call's opts.ctas */
  int rank, world, device;
  int listed;            /* 1: in the lookup table */
  iris_t *iris;          /* NULL: every call forwards (atomic: read without the lock) */
  int revoked;           /* ncclCommRevoke or an abort: later calls forward */
  pthread_mutex_t lock;  /* around every iris call and the teardown (abort may come from another thread) */
  iris_nccl_table_t table;            /* the agreed routing table */
  unsigned long long served[IRIS_NCCL_KINDS], forwarded[IRIS_NCCL_KINDS];
  unsigned long long noted;           /* debug: (kind, route) pairs already printed */
  int reported;                       /* debug: the closing counts were printed */
  iris_bootstrap_t boot;              /* iris's mode-2 hooks, over the real communicator */
  cudaStream_t boot_stream;
  void *boot_buf;
  size_t boot_cap;
  /* teardown against faults and a concurrent ncclCommAbort (iris_nccl_drop) */
  pthread_mutex_t use;                /* held while an exchange enqueues on the real communicator: ncclCommAbort waits for it before NCCL frees it */
  int aborting;                       /* ncclCommAbort began (atomic): exchanges give up and enqueue nothing more; a teardown does not forward */
  int bound_ms;                       /* > 0: an exchange waits at most this long (the teardown's meeting); 0: as NCCL's own calls */
  int boot_stuck;                     /* an exchange gave up: its allgather may still run on boot_stream, whose buffers then stay */
  iris_t *closing;                    /* the context a teardown is dropping (atomic), for iris_abort from ncclCommAbort */
  char why[192];                      /* why there is no iris context */
  uint64_t clique;                    /* rank 0's bring-up nonce: the same for every rank of the communicator */
  int here;                           /* ranks of the communicator in this process (iris_nccl_ranks_here) */
  unsigned long long seq;             /* bring-up order in this process: ncclMemAlloc lends from the oldest context of a device */
  /* memory (under lock): windows, ncclMemAlloc blocks of this context's heap */
  iris_nccl_window_t *windows;        /* the windows the shim keeps for this communicator */
  unsigned long long lent;            /* blocks of this context's heap that ncclMemAlloc gave out and ncclMemFree has not taken back */
  iris_t *kept;                       /* a torn-down context left mapped for those blocks (finalized when the last is freed) */
  /* teardown of ranks that share this process (iris_nccl_teardown; under iris_nccl_slots_lock) */
  iris_t *parked;                     /* every rank of the communicator here: left, its context waits for the last to leave (under lock) */
  struct iris_nccl_comm *next_parked; /* the parked list */
  int claimed;                        /* some ranks elsewhere: a teardown of this process's ranks took this one */
  int dropped;                        /* that teardown is done with it (under lock) */
  int left;                           /* every rank here: this one has left the set (iris_nccl_leave_set) */
  unsigned long long zero_copy[IRIS_NCCL_KINDS]; /* of served: calls on buffers in zero-copy windows */
  /* an async error iris reported through ncclCommGetAsyncError (iris_nccl_async_answer):
   * an ncclResult_t, 0: none (atomic); from then on ncclCommGetAsyncError returns it and
   * every collective on the communicator returns it at once, as NCCL's own async error */
  int latched;
  char latched_why[256]; /* its text (under iris_nccl_latch_lock) */
} iris_nccl_comm_t;
static pthread_mutex_t iris_nccl_latch_lock = PTHREAD_MUTEX_INITIALIZER;

/* The lookup table: real communicator -> record, open addressing over a fixed array.
 * Readers take no lock (records are never freed: a reader holding a stale one finds
 * iris == NULL and forwards); writers hold iris_nccl_slots_lock. */
#define IRIS_NCCL_SLOTS 4096
#define IRIS_NCCL_TOMB ((iris_nccl_comm_t *)1)
static iris_nccl_comm_t *iris_nccl_slots[IRIS_NCCL_SLOTS];
static pthread_mutex_t iris_nccl_slots_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned iris_nccl_hash(const void *p) { return (unsigned)((((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull) >> 52) & (IRIS_NCCL_SLOTS - 1); }

static iris_nccl_comm_t *iris_nccl_find(ncclComm_t comm) {
  unsigned h, i;
  if (!comm) return NULL;
  h = iris_nccl_hash(comm);
  for (i = 0; i < IRIS_NCCL_SLOTS; i++) {
    iris_nccl_comm_t *c = __atomic_load_n(&iris_nccl_slots[(h + i) & (IRIS_NCCL_SLOTS - 1)], __ATOMIC_ACQUIRE);
    if (!c) return NULL;
    if (c != IRIS_NCCL_TOMB && c->comm == comm) return c;
  }
  return NULL;
}
/* A record for a communicator the real NCCL just handed out. A record left listed at the
 * same address belongs to one that NCCL has freed without the shim's teardown seeing it
 * (one created in a group that failed, then aborted): it is unlisted first, so it cannot
 * shadow the new one (its calls would all go to NCCL on this rank while the peers' went
 * to iris). */
static int iris_nccl_insert(iris_nccl_comm_t *c) {
  unsigned h = iris_nccl_hash(c->comm), i;
  iris_nccl_comm_t **free_slot = NULL;
  pthread_mutex_lock(&iris_nccl_slots_lock);
  for (i = 0; i < IRIS_NCCL_SLOTS; i++) {
    iris_nccl_comm_t **slot = &iris_nccl_slots[(h + i) & (IRIS_NCCL_SLOTS - 1)], *old = *slot;
    if (old == NULL) {
      if (!free_slot) free_slot = slot;
      break; /* the end of this address's probe sequence */
    }
    if (old == IRIS_NCCL_TOMB) {
      if (!free_slot) free_slot = slot;
    } else if (old->comm == c->comm) {
      old->listed = 0;
      __atomic_store_n(slot, IRIS_NCCL_TOMB, __ATOMIC_RELEASE);
      if (!free_slot) free_slot = slot;
    }
  }
  if (free_slot) __atomic_store_n(free_slot, c, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&iris_nccl_slots_lock);
  return free_slot != NULL;
}
static void iris_nccl_remove(iris_nccl_comm_t *c) {
  unsigned i;
  pthread_mutex_lock(&iris_nccl_slots_lock);
  for (i = 0; i < IRIS_NCCL_SLOTS; i++)
    if (iris_nccl_slots[i] == c) __atomic_store_n(&iris_nccl_slots[i], IRIS_NCCL_TOMB, __ATOMIC_RELEASE);
  c->listed = 0;
  pthread_mutex_unlock(&iris_nccl_slots_lock);
}

/* The shim's own CUDA work (bring-up, window exchanges, teardown, ncclMemAlloc /
 * ncclMemFree of the heap) runs in relaxed capture mode, as NCCL's own does: its
 * allocations, frees, copies and synchronisations (on streams that are never captured)
 * then neither fail in nor invalidate a capture in global mode, another thread's or
 * this thread's. The per-call path (iris_nccl_collective) keeps the caller's mode: the
 * program captures iris's calls on purpose. iris_nccl_relax returns the mode to restore. */
static cudaStreamCaptureMode iris_nccl_relax(void) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) mode = cudaStreamCaptureModeRelaxed; /* nothing was changed: nothing to restore */
  return mode;
}
static void iris_nccl_unrelax(cudaStreamCaptureMode mode) {
  if (mode != cudaStreamCaptureModeRelaxed) cudaThreadExchangeStreamCaptureMode(&mode);
}

/* this thread's current device, switched to `device` (returns the one to restore) */
static int iris_nccl_enter_device(int device) {
  int old = -1;
  if (cudaGetDevice(&old) != cudaSuccess) old = -1;
  if (old != device) cudaSetDevice(device);
  return old;
}
static void iris_nccl_leave_device(int old, int device) {
  if (old >= 0 && old != device) cudaSetDevice(old);
}

/* ========================================== iris's bootstrap over the real NCCL == */
/* The wait for the exchange's allgather on boot_stream: unbounded as NCCL's own calls
 * (c->bound_ms 0: bring-up, windows), else at most c->bound_ms and no longer once
 * ncclCommAbort began (the teardown's meeting). Giving up leaves the allgather enqueued:
 * boot_stuck keeps its buffers and refuses later exchanges. 0: done. */
static int iris_nccl_boot_wait(iris_nccl_comm_t *c) {
  struct timespec t0, now, nap = {0, 200000};
  cudaError_t e;
  if (c->bound_ms <= 0) return cudaStreamSynchronize(c->boot_stream) == cudaSuccess ? 0 : 1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while ((e = cudaStreamQuery(c->boot_stream)) == cudaErrorNotReady) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (__atomic_load_n(&c->aborting, __ATOMIC_ACQUIRE) || (now.tv_sec - t0.tv_sec) * 1000LL + (now.tv_nsec - t0.tv_nsec) / 1000000 >= c->bound_ms) {
      c->boot_stuck = 1;
      return 1;
    }
    nanosleep(&nap, NULL);
  }
  return e == cudaSuccess ? 0 : 1;
}
/* iris_bootstrap_t.allgather: the bytes through a device buffer, ncclAllGather on the
 * real communicator on a private stream, back to the host. Blocking, as iris expects
 * (bounded in the teardown: iris_nccl_boot_wait). */
static int iris_nccl_boot_allgather(void *user, const void *send, void *recv, size_t bytes) {
  iris_nccl_comm_t *c = (iris_nccl_comm_t *)user;
  iris_nccl_fn_ncclAllGather_t ag = IRIS_NCCL_REAL(ncclAllGather);
  const size_t b = bytes ? bytes : 1, need = b * (size_t)c->world;
  unsigned char one = 0;
  int old, rc = 1, sent;
  if (!ag || c->boot_stuck) return 1;
  old = iris_nccl_enter_device(c->device);
  if (need > c->boot_cap) {
    void *p = NULL;
    if (cudaMalloc(&p, need) == cudaSuccess) {
      if (c->boot_buf) cudaFree(c->boot_buf);
      c->boot_buf = p;
      c->boot_cap = need;
    }
  }
  if (need <= c->boot_cap) {
    char *mine = (char *)c->boot_buf + (size_t)c->rank * b;
    pthread_mutex_lock(&c->use); /* ncclCommAbort frees the real communicator only after this */
    sent = !__atomic_load_n(&c->aborting, __ATOMIC_ACQUIRE) &&
           cudaMemcpyAsync(mine, bytes ? send : &one, b, cudaMemcpyHostToDevice, c->boot_stream) == cudaSuccess &&
           ag(mine, c->boot_buf, b, ncclUint8, c->comm, c->boot_stream) == ncclSuccess;
    pthread_mutex_unlock(&c->use);
    /* the copy back only after the wait: into pageable memory it would block until the allgather ends */
    if (sent && iris_nccl_boot_wait(c) == 0 &&
        (!bytes || (cudaMemcpyAsync(recv, c->boot_buf, need, cudaMemcpyDeviceToHost, c->boot_stream) == cudaSuccess &&
                    cudaStreamSynchronize(c->boot_stream) == cudaSuccess)))
      rc = 0;
  }
  iris_nccl_leave_device(old, c->device);
  return rc;
}
static int iris_nccl_boot_barrier(void *user) { return iris_nccl_boot_allgather(user, NULL, NULL, 0); }
/* The same after the bring-up (window registration, teardown): any thread, possibly one
 * that is capturing a graph on a stream of its own, so in relaxed capture mode (the
 * exchange's stream is never captured). 0 on success. */
static int iris_nccl_exchange(iris_nccl_comm_t *c, const void *send, void *recv, size_t bytes) {
  cudaStreamCaptureMode mode;
  int rc;
  if (!c->boot_cap) return 1;
  mode = iris_nccl_relax();
  rc = iris_nccl_boot_allgather(c, send, recv, bytes);
  iris_nccl_unrelax(mode);
  return rc;
}

/* ================================================================== bring-up == */
static void iris_nccl_print_table(const iris_nccl_comm_t *c, const char *what) {
  int k;
  fprintf(stderr, "iris_nccl: comm %p rank %d of %d (GPU %d): %s\n", (void *)c->comm, c->rank, c->world, c->device, what);
  if (!c->iris) return;
  for (k = 0; k < IRIS_NCCL_KINDS; k++) {
    if (c->table.max_bytes[k])
      fprintf(stderr, "iris_nccl:   %-13s -> iris up to %llu bytes of %s, NCCL above\n", iris_nccl_kind_names[k], c->table.max_bytes[k], iris_nccl_kind_measure[k]);
    else
      fprintf(stderr, "iris_nccl:   %-13s -> NCCL\n", iris_nccl_kind_names[k]);
  }
  fprintf(stderr, "iris_nccl:   reductions of fp32, fp16, bf16, fp8, int32, int64, uint8 (sum, min, max, avg) and int8, uint32, uint64 (sum); "
                  "moves of any type; every other call -> NCCL%s\n",
          iris_nccl_options()->groups ? "" : "; calls inside ncclGroupStart/End -> NCCL");
}

/* A random 64-bit word (clock, counter, address and /dev/urandom when it reads). */
static uint64_t iris_nccl_random(void) {
  static unsigned long long counter;
  struct timespec ts;
  uint64_t x = 0, n = __atomic_add_fetch(&counter, 1ULL, __ATOMIC_RELAXED);
  FILE *f = fopen("/dev/urandom", "rb");
  if (f) {
    if (fread(&x, sizeof x, 1, f) != 1) x = 0;
    fclose(f);
  }
  clock_gettime(CLOCK_MONOTONIC, &ts);
  x ^= ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) * 0x9E3779B97F4A7C15ull ^ n * 0xBF58476D1CE4E5B9ull ^ (uint64_t)(uintptr_t)&ts;
  x ^= x >> 31;
  return x ? x : 1;
}
/* This process's word: its pid above a random one, drawn once. */
static pthread_once_t iris_nccl_proc_ctl = PTHREAD_ONCE_INIT;
static uint64_t iris_nccl_proc_word;
static void iris_nccl_proc_init(void) { iris_nccl_proc_word = ((uint64_t)getpid() << 32) ^ (iris_nccl_random() & 0xffffffffull); }

/* One communicator, collective over its ranks (see the top of the file). Runs in the
 * thread that created it, or in a helper thread when one thread created several, in
 * relaxed capture mode (iris_nccl_bring_up). */
static void iris_nccl_bring_up_relaxed(iris_nccl_comm_t *c) {
  const iris_nccl_options_t *o = iris_nccl_options();
  iris_nccl_fn_ncclCommCount_t count = IRIS_NCCL_REAL(ncclCommCount);
  iris_nccl_fn_ncclCommUserRank_t user_rank = IRIS_NCCL_REAL(ncclCommUserRank);
  iris_nccl_fn_ncclCommCuDevice_t cu_device = IRIS_NCCL_REAL(ncclCommCuDevice);
  iris_nccl_record_t me, *all = NULL;
  iris_t *ctx = NULL;
  int old, r, ok;
  if (!count || !user_rank || !cu_device || count(c->comm, &c->world) != ncclSuccess || user_rank(c->comm, &c->rank) != ncclSuccess ||
      cu_device(c->comm, &c->device) != ncclSuccess) {
    snprintf(c->why, sizeof c->why, "the real NCCL did not report the communicator's size, rank or device");
    return;
  }
  if (c->world < 2) { /* every rank knows the size: no exchange needed to agree */
    snprintf(c->why, sizeof c->why, "a communicator of one rank");
    if (o->debug) iris_nccl_print_table(c, "NCCL only: a communicator of one rank");
    return;
  }
  old = iris_nccl_enter_device(c->device);
  c->boot.user = c;
  c->boot.allgather = iris_nccl_boot_allgather;
  c->boot.barrier = iris_nccl_boot_barrier;
  c->boot_cap = (size_t)c->world * 16384; /* iris's exchanges fit; a larger one grows it */
  all = (iris_nccl_record_t *)calloc((size_t)c->world, sizeof *all);
  if (!all || cudaStreamCreateWithFlags(&c->boot_stream, cudaStreamNonBlocking) != cudaSuccess || cudaMalloc(&c->boot_buf, c->boot_cap) != cudaSuccess) {
    /* cannot take part in the exchange: the peers will wait in it (a process this short
     * of memory fails the program's own NCCL calls too) */
    snprintf(c->why, sizeof c->why, "no host or GPU memory, or no stream, for the bring-up exchange");
    c->boot_cap = 0;
    free(all);
    iris_nccl_leave_device(old, c->device);
    return;
  }

  /* 1. this rank's record */
  memset(&me, 0, sizeof me);
  me.magic = IRIS_NCCL_RECORD_MAGIC;
  me.version = IRIS_NCCL_RECORD_VERSION;
  me.want = 1;
  me.max_ctas = c->max_ctas > 0 ? c->max_ctas : iris_nccl_config_ctas(NULL);
  me.heap_bytes = (o->heap ? o->heap : iris_nccl_default_heap(c->world, o->staging)) + o->memalloc;
  pthread_once(&iris_nccl_proc_ctl, iris_nccl_proc_init);
  me.proc = iris_nccl_proc_word;
  me.nonce = iris_nccl_random();
  {
    const iris_nccl_table_t tw = iris_nccl_table_for_world(&o->table, c->world);
    for (r = 0; r < IRIS_NCCL_KINDS; r++) me.max_bytes[r] = tw.max_bytes[r];
  }
  snprintf(me.staging, sizeof me.staging, "%s", o->staging_str);
  if (iris_nccl_host_identity(me.host, sizeof me.host, me.why, sizeof me.why) != 0) me.want = 0; /* set empty since the options were read */
  if (cudaDeviceGetAttribute(&me.cc_major, cudaDevAttrComputeCapabilityMajor, c->device) != cudaSuccess ||
      cudaDeviceGetAttribute(&me.sms, cudaDevAttrMultiProcessorCount, c->device) != cudaSuccess ||
      cudaDeviceGetPCIBusId(me.bus, (int)sizeof me.bus, c->device) != cudaSuccess) {
    me.want = 0;
    snprintf(me.why, sizeof me.why, "could not query GPU %d (compute capability, SMs, PCI bus id)", c->device);
  }
  if (o->bad) {
    me.want = 0;
    snprintf(me.why, sizeof me.why, "%s", o->why);
  } else if (!c->listed) {
    me.want = 0;
    snprintf(me.why, sizeof me.why, "the shim's table of %d communicators is full", IRIS_NCCL_SLOTS);
  }

  /* 2. every rank's record, and the verdict they all draw from them */
  if (iris_nccl_boot_allgather(c, &me, all, sizeof me) != 0) {
    snprintf(c->why, sizeof c->why, "the bring-up exchange over the real communicator failed");
    ok = 0;
  } else {
    ok = iris_nccl_decide(all, c->world, c->why, sizeof c->why);
    if (ok) {
      c->clique = all[0].nonce;
      c->here = iris_nccl_ranks_here(all, c->world, c->rank);
    }
  }
  if (ok) {
    /* 3. iris in mode 2 beside the real communicator; its hooks are the exchange above */
    iris_config_t cfg = IRIS_CONFIG_INIT;
    iris_status_t st;
    int32_t mine, *oks = (int32_t *)all; /* the records are no longer needed */
    for (r = 0; r < IRIS_NCCL_KINDS; r++) c->table.max_bytes[r] = all[0].max_bytes[r];
    c->max_ctas = iris_nccl_agreed_ctas(all, c->world);
    cfg.rank = c->rank;
    cfg.world_size = c->world;
    cfg.device = c->device;
    cfg.heap_size = (size_t)all[0].heap_bytes;
    cfg.bootstrap = &c->boot;
    iris_nccl_staging_env(1);
    st = iris_init(&cfg, &ctx);
    if (st == IRIS_SUCCESS && iris_num_nodes(ctx) != 1) { /* cannot happen after the host check; never serve one */
      snprintf(c->why, sizeof c->why, "iris grouped the ranks into %d nodes", iris_num_nodes(ctx));
      st = IRIS_ERROR_DIFFERENT_HOST;
    } else if (st == IRIS_SUCCESS && (st = iris_collectives_setup(ctx)) != IRIS_SUCCESS) {
      snprintf(c->why, sizeof c->why, "iris_collectives_setup: %s", iris_error_detail());
      iris_finalize(ctx); /* collective: the setup failed alike on every rank */
      ctx = NULL;
    } else if (st != IRIS_SUCCESS) {
      snprintf(c->why, sizeof c->why, "iris_init: %s", iris_error_detail());
    }
    iris_nccl_staging_env(0);
    /* 4. all keep the context or all drop it */
    mine = (int32_t)st;
    if (iris_nccl_boot_allgather(c, &mine, oks, sizeof mine) != 0) {
      if (st == IRIS_SUCCESS) snprintf(c->why, sizeof c->why, "the closing exchange over the real communicator failed");
      st = IRIS_ERROR_BOOTSTRAP;
    } else {
      for (r = 0; r < c->world && st == IRIS_SUCCESS; r++)
        if (oks[r] != IRIS_SUCCESS) {
          snprintf(c->why, sizeof c->why, "rank %d could not bring iris up (%s)", r, iris_status_string((iris_status_t)oks[r]));
          st = (iris_status_t)oks[r];
        }
    }
    if (st != IRIS_SUCCESS && ctx) {
      iris_abort(ctx); /* the others dropped theirs: no barrier to meet */
      iris_finalize(ctx);
      ctx = NULL;
    }
  }
  free(all);
  if (ctx) {
    static unsigned long long seqs;
    c->why[0] = 0;
    c->seq = __atomic_add_fetch(&seqs, 1ull, __ATOMIC_RELAXED);
    __atomic_store_n(&c->iris, ctx, __ATOMIC_RELEASE);
  }
  iris_nccl_leave_device(old, c->device);
  if (o->debug && (o->debug >= 2 || c->rank == 0)) {
    char what[256];
    if (ctx) snprintf(what, sizeof what, "iris up beside NCCL (heap %zu MiB per rank)", iris_heap_size(ctx) >> 20);
    else snprintf(what, sizeof what, "NCCL only: %s", c->why);
    iris_nccl_print_table(c, what);
  }
}

static void iris_nccl_bring_up(iris_nccl_comm_t *c) {
  cudaStreamCaptureMode mode = iris_nccl_relax(); /* its stream, buffers, exchanges, iris_init: never captured */
  iris_nccl_bring_up_relaxed(c);
  iris_nccl_unrelax(mode);
}
static void *iris_nccl_bring_up_thread(void *arg) {
  iris_nccl_bring_up((iris_nccl_comm_t *)arg);
  return NULL;
}
/* Several communicators created by one thread (ncclCommInitAll, or several
 * ncclCommInitRank in one group): each exchange blocks until all its ranks arrive, and
 * they may all be in this process, so each runs in a thread of its own. */
static void iris_nccl_bring_up_all(iris_nccl_comm_t **cs, int n) {
  pthread_t *t;
  int *started, i;
  if (n == 1) {
    iris_nccl_bring_up(cs[0]);
    return;
  }
  t = (pthread_t *)calloc((size_t)n, sizeof *t);
  started = (int *)calloc((size_t)n, sizeof *started);
  for (i = 0; i < n; i++) started[i] = t && started && pthread_create(&t[i], NULL, iris_nccl_bring_up_thread, cs[i]) == 0;
  for (i = 0; i < n; i++) {
    if (started[i]) pthread_join(t[i], NULL);
    else iris_nccl_bring_up(cs[i]); /* no thread: in line (it may wait for the others) */
  }
  free(t);
  free(started);
}

/* communicators created inside this thread's open group, brought up at its end */
static __thread int iris_nccl_depth;
static __thread iris_nccl_comm_t **iris_nccl_pending;
static __thread int iris_nccl_npending, iris_nccl_cpending;

/* iris_nccl_is_blocking (nccl/route.h) of a config (NULL: none); parent: a split's (-1: none) */
static int iris_nccl_blocking(const ncclConfig_t *config, int inherit, int parent = -1) {
  return iris_nccl_is_blocking(config ? config->blocking : NCCL_CONFIG_UNDEF_INT, inherit, getenv("NCCL_COMM_BLOCKING"), parent);
}

/* A communicator the real NCCL just created: a record, and a bring-up now, at the end
 * of the open group, or never (non-blocking: NCCL's calls on it may return before it is
 * ready, and a blocking exchange there is not NCCL's semantics). */
static iris_nccl_comm_t *iris_nccl_adopt(ncclComm_t comm, int blocking) {
  iris_nccl_comm_t *c;
  if (!comm || iris_nccl_options()->disable) return NULL;
  if (!(c = (iris_nccl_comm_t *)calloc(1, sizeof *c))) return NULL;
  c->comm = comm;
  c->blocking = blocking;
  pthread_mutex_init(&c->lock, NULL);
  pthread_mutex_init(&c->use, NULL);
  c->listed = iris_nccl_insert(c);
  if (!blocking) snprintf(c->why, sizeof c->why, "a non-blocking communicator (ncclConfig_t.blocking = 0 or NCCL_COMM_BLOCKING=0)");
  return c;
}
static void iris_nccl_created(iris_nccl_comm_t **cs, int n) {
  int i, m = 0;
  for (i = 0; i < n; i++)
    if (cs[i] && cs[i]->blocking) cs[m++] = cs[i];
  if (m == 0) return;
  if (iris_nccl_depth > 0) {
    if (iris_nccl_npending + m > iris_nccl_cpending) {
      int cap = (iris_nccl_npending + m) * 2;
      iris_nccl_comm_t **p = (iris_nccl_comm_t **)realloc(iris_nccl_pending, (size_t)cap * sizeof *p);
      if (!p) return; /* out of host memory: these stay NCCL only (the peers will wait in their exchange) */
      iris_nccl_pending = p;
      iris_nccl_cpending = cap;
    }
    for (i = 0; i < m; i++) iris_nccl_pending[iris_nccl_npending++] = cs[i];
    return;
  }
  iris_nccl_bring_up_all(cs, m);
}

/* the group ended (ok: the real ncclGroupEnd succeeded): bring up what it created */
static void iris_nccl_group_closed(int ok) {
  iris_nccl_comm_t **list = iris_nccl_pending;
  int n = iris_nccl_npending, i;
  iris_nccl_pending = NULL;
  iris_nccl_npending = iris_nccl_cpending = 0;
  if (n == 0) return;
  if (ok) iris_nccl_bring_up_all(list, n);
  else
    for (i = 0; i < n; i++) snprintf(list[i]->why, sizeof list[i]->why, "the group that created it did not end with ncclSuccess");
  free(list);
}

/* ================================================================== teardown == */
/* ncclCommAbort, ncclCommRevoke, ncclCommShrink(NCCL_SHRINK_ABORT), any thread: later
 * calls forward and iris's kernels stop, those of a context a teardown is dropping too
 * (iris_abort keeps off a context iris_finalize has begun freeing). */
static void iris_nccl_stop(iris_nccl_comm_t *c) {
  iris_t *ctx;
  c->revoked = 1;
  if ((ctx = __atomic_load_n(&c->iris, __ATOMIC_ACQUIRE)) != NULL) iris_abort(ctx);
  if ((ctx = __atomic_load_n(&c->closing, __ATOMIC_ACQUIRE)) != NULL) iris_abort(ctx);
}
static void iris_nccl_report(iris_nccl_comm_t *c, const char *event) {
  const iris_nccl_options_t *o = iris_nccl_options();
  char line[512] = "";
  int k;
  if (!o->debug || c->reported || (o->debug < 2 && c->rank != 0)) return;
  c->reported = 1;
  for (k = 0; k < IRIS_NCCL_KINDS; k++)
    iris_nccl_append(line, sizeof line, " %s %llu/%llu", iris_nccl_kind_names[k], c->served[k], c->forwarded[k]);
  fprintf(stderr, "iris_nccl: comm %p rank %d of %d %s: calls served by iris / forwarded to NCCL:%s\n", (void *)c->comm, c->rank, c->world, event, line);
  line[0] = 0;
  for (k = 0; k < IRIS_NCCL_KINDS; k++)
    if (c->served[k]) iris_nccl_append(line, sizeof line, " %s %llu/%llu", iris_nccl_kind_names[k], c->zero_copy[k], c->served[k] - c->zero_copy[k]);
  if (line[0]) fprintf(stderr, "iris_nccl: comm %p rank %d of %d %s: iris's calls zero-copy (windows) / staged:%s\n", (void *)c->comm, c->rank, c->world, event, line);
}

/* Drop the iris context. finalize: the ranks meet once over the real communicator (so
 * before the real one is finalized), each after its GPU finished its work, as
 * iris_finalize's barrier would; then each frees its context locally (no barrier).
 * The shim meets them itself because iris_finalize's barrier in mode 2 is the
 * bootstrap's hook, which has no bound of its own; the meeting here waits at most the
 * barrier bound (IRIS_BARRIER_TIMEOUT_MS, else 600 s) and gives up at once when
 * ncclCommAbort begins in another thread. A meeting that failed or gave up leaves the
 * context stopped (iris_abort) and mapped until the process exits, as a fault (a dead
 * or hung peer, an NCCL async error, an abort) does without a meeting: a peer may still
 * touch its heap. Blocks ncclMemAlloc gave out from the heap outlive the communicator,
 * as NCCL's do: a rank that holds some keeps its context mapped until ncclMemFree takes
 * the last back. */
/* A context no peer meets in a barrier any more, under c->lock with its GPU current:
 * stopped (iris_abort), then freed locally, or kept mapped while ncclMemAlloc blocks of
 * its heap are out (ncclMemFree of the last one finalizes it); the bootstrap's buffers go. */
static void iris_nccl_release_local(iris_nccl_comm_t *c, iris_t *ctx) {
  iris_abort(ctx); /* then iris_finalize is local: no barrier to meet */
  if (c->lent) {
    c->kept = ctx;
    if (iris_nccl_options()->debug)
      fprintf(stderr, "iris_nccl: comm %p rank %d: %llu ncclMemAlloc block(s) of its heap not freed yet: the heap stays until ncclMemFree takes them back\n",
              (void *)c->comm, c->rank, c->lent);
  } else if (iris_finalize(ctx) != IRIS_SUCCESS && iris_nccl_options()->debug) {
    fprintf(stderr, "iris_nccl: comm %p rank %d: iris_finalize: %s\n", (void *)c->comm, c->rank, iris_error_detail());
  }
}
/* The bootstrap's buffers of a context that is gone, under c->lock with its GPU current. */
static void iris_nccl_free_boot(iris_nccl_comm_t *c) {
  if (c->boot_buf) cudaFree(c->boot_buf);
  if (c->boot_stream) cudaStreamDestroy(c->boot_stream);
  c->boot_buf = NULL;
  c->boot_stream = NULL;
  c->boot_cap = 0;
}

static void iris_nccl_drop_relaxed(iris_nccl_comm_t *c, int finalize) {
  iris_nccl_fn_ncclCommGetAsyncError_t async = IRIS_NCCL_REAL(ncclCommGetAsyncError);
  iris_t *ctx;
  int old;
  pthread_mutex_lock(&c->lock);
  ctx = c->iris;
  if (ctx) {
    __atomic_store_n(&c->closing, ctx, __ATOMIC_RELEASE); /* ncclCommAbort in another thread stops it (iris_abort) while this runs */
    __atomic_store_n(&c->iris, (iris_t *)NULL, __ATOMIC_RELEASE);
    old = iris_nccl_enter_device(c->device);
    /* inside this thread's group the meeting's allgather would start only at the group's end: no meeting */
    if (finalize && !c->revoked && !__atomic_load_n(&c->aborting, __ATOMIC_ACQUIRE) && iris_nccl_depth == 0) {
      ncclResult_t ae = ncclSuccess;
      if (async && async(c->comm, &ae) == ncclSuccess && (ae == ncclSuccess || ae == ncclInProgress) && iris_get_async_error(ctx) != IRIS_ERROR_TIMEOUT &&
          iris_get_async_error(ctx) != IRIS_ERROR_PEER_FAILED) {
        int32_t mine, all[IRIS_MAX_RANKS];
        int met;
        /* this GPU's work first (iris's kernels give up within their bound), then the meeting */
        mine = cudaDeviceSynchronize() != cudaSuccess;
        c->bound_ms = iris_nccl_options()->barrier_ms;
        met = c->world <= IRIS_MAX_RANKS && iris_nccl_exchange(c, &mine, all, sizeof mine) == 0;
        c->bound_ms = 0;
        for (int r = 0; met && r < c->world; r++) met = all[r] == 0; /* a GPU that failed: its kernels' state is unknown */
        if (met) { /* every rank's GPU is done with every heap: each frees its own */
          iris_nccl_release_local(c, ctx); /* kept mapped while ncclMemAlloc blocks of its heap are out */
          ctx = NULL;
        } else if (iris_nccl_options()->debug) {
          fprintf(stderr, "iris_nccl: comm %p rank %d: the teardown's meeting %s: its iris context stays mapped\n", (void *)c->comm, c->rank,
                  __atomic_load_n(&c->aborting, __ATOMIC_ACQUIRE) ? "gave up (ncclCommAbort)"
                  : c->boot_stuck                                  ? "ran out (IRIS_BARRIER_TIMEOUT_MS): a peer did not come"
                                                                   : "failed over the real communicator");
        }
        if (!c->boot_stuck) iris_nccl_free_boot(c); /* else its allgather may still run: the buffers stay */
      }
    }
    if (ctx) iris_abort(ctx); /* left mapped (see above) */
    iris_nccl_leave_device(old, c->device);
    __atomic_store_n(&c->closing, (iris_t *)NULL, __ATOMIC_RELEASE);
  }
  c->dropped = 1;
  pthread_mutex_unlock(&c->lock);
}

/* iris_nccl_drop_relaxed in relaxed capture mode (its exchanges, iris_finalize, frees) */
static void iris_nccl_drop(iris_nccl_comm_t *c, int finalize) {
  cudaStreamCaptureMode mode = iris_nccl_relax();
  iris_nccl_drop_relaxed(c, finalize);
  iris_nccl_unrelax(mode);
}

/* Finalize (or Destroy) of a communicator with an iris context, where several of its ranks
 * live in this process (threads, or one thread that tears them down in turn, as
 * nccl-tests' main thread does).
 *
 * Every rank of the communicator here (one process, the common case): as NCCL, whose
 * last ncclCommDestroy among a process's ranks frees all of them. A rank that leaves
 * parks its context (no call goes to it any more; ncclMemFree still takes its blocks
 * back) and its real communicator is finalized at once; the last rank to leave waits
 * for every rank's GPU (as NCCL's cudaFree there does), then stops and frees every
 * parked context locally: no barrier, so no real communicator is needed, and a rank
 * that left first never touches another rank's GPU while that rank may still be busy
 * (a rank that destroyed a child communicator and went on to a call of the parent
 * deadlocked with the other rank's teardown on 2 H200s when the first teardown freed
 * every rank's context).
 *
 * Some ranks in other processes: iris_finalize meets every rank in a barrier over the
 * real communicators, so the first teardown here claims every rank of the communicator
 * in this process and finalizes each in a thread of its own (their real communicators
 * are still whole: NCCL's teardown comes after); a later teardown of a claimed rank
 * waits until its context is gone, then forwards. A rank of the set whose context is
 * gone already (an abort) leaves nobody to meet: the others stop their kernels without
 * the barrier. */
static void *iris_nccl_drop_thread(void *arg) {
  iris_nccl_drop((iris_nccl_comm_t *)arg, 1);
  return NULL;
}
static iris_nccl_comm_t *iris_nccl_parked_list; /* under iris_nccl_slots_lock */

/* The last rank here of a communicator all of whose ranks live in this process: every
 * GPU of the set finishes its work, then every parked context is stopped and freed
 * (one kept mapped while ncclMemAlloc blocks of its heap are out). */
static void iris_nccl_free_parked(iris_nccl_comm_t **set, int n) {
  cudaStreamCaptureMode mode = iris_nccl_relax(); /* device synchronisations, iris_finalize */
  int i, old;
  for (i = 0; i < n; i++) { /* no peer kernel may still touch a heap that is freed */
    if (!set[i]->parked) continue; /* an aborted rank's GPU may hold kernels waiting on a dead peer: its kernels of ours gave up */
    old = iris_nccl_enter_device(set[i]->device);
    cudaDeviceSynchronize();
    iris_nccl_leave_device(old, set[i]->device);
  }
  for (i = 0; i < n; i++) {
    iris_nccl_comm_t *m = set[i];
    iris_t *ctx;
    pthread_mutex_lock(&m->lock);
    ctx = m->parked;
    m->parked = NULL;
    if (ctx) {
      old = iris_nccl_enter_device(m->device);
      iris_nccl_release_local(m, ctx);
      iris_nccl_free_boot(m);
      iris_nccl_leave_device(old, m->device);
    }
    m->dropped = 1;
    pthread_mutex_unlock(&m->lock);
  }
  iris_nccl_unrelax(mode);
}

/* A rank of a communicator all of whose ranks live here has left (its context parked, or
 * stopped by an abort): the last of them frees every parked context. Once per rank. */
static void iris_nccl_leave_set(iris_nccl_comm_t *c) {
  iris_nccl_comm_t **set, **pp;
  int n = 0;
  pthread_mutex_lock(&iris_nccl_slots_lock);
  if (c->left) {
    pthread_mutex_unlock(&iris_nccl_slots_lock);
    return;
  }
  c->left = 1;
  c->next_parked = iris_nccl_parked_list;
  iris_nccl_parked_list = c;
  for (iris_nccl_comm_t *m = iris_nccl_parked_list; m; m = m->next_parked) n += m->clique == c->clique;
  set = n >= c->here ? (iris_nccl_comm_t **)calloc((size_t)c->here, sizeof *set) : NULL;
  n = 0;
  if (set) { /* the last to leave: the set out of the list */
    for (pp = &iris_nccl_parked_list; *pp;) {
      if ((*pp)->clique == c->clique && n < c->here) {
        set[n++] = *pp;
        *pp = (*pp)->next_parked;
      } else {
        pp = &(*pp)->next_parked;
      }
    }
  }
  pthread_mutex_unlock(&iris_nccl_slots_lock);
  if (n) iris_nccl_free_parked(set, n);
  free(set);
}

static void iris_nccl_teardown(iris_nccl_comm_t *c) {
  iris_nccl_comm_t **set;
  pthread_t *t;
  int n = 0, i, finalize = 1, claimed;
  unsigned k;
  if (c->here <= 1 || !__atomic_load_n(&c->iris, __ATOMIC_ACQUIRE)) {
    iris_nccl_drop(c, 1);
    return;
  }
  if (c->here == c->world) {
    iris_t *ctx;
    pthread_mutex_lock(&c->lock);
    ctx = c->revoked ? NULL : c->iris;
    if (ctx) {
      c->parked = ctx;
      __atomic_store_n(&c->iris, (iris_t *)NULL, __ATOMIC_RELEASE); /* later calls forward */
    }
    pthread_mutex_unlock(&c->lock);
    if (!ctx) iris_nccl_drop(c, 0); /* revoked (or aborted meanwhile): stopped, left mapped; it still counts as gone */
    iris_nccl_leave_set(c);
    return;
  }
  set = (iris_nccl_comm_t **)calloc((size_t)c->here, sizeof *set);
  t = (pthread_t *)calloc((size_t)c->here, sizeof *t);
  if (!set || !t) finalize = 0;
  pthread_mutex_lock(&iris_nccl_slots_lock);
  claimed = c->claimed;
  c->claimed = 1;
  for (k = 0; k < IRIS_NCCL_SLOTS && finalize && !claimed; k++) {
    iris_nccl_comm_t *m = iris_nccl_slots[k];
    if (!m || m == IRIS_NCCL_TOMB || m == c || m->clique != c->clique || m->claimed || !__atomic_load_n(&m->iris, __ATOMIC_ACQUIRE)) continue;
    if (n + 1 >= c->here) { finalize = 0; break; } /* more than the bring-up counted: not the set we know */
    set[n++] = m;
  }
  for (i = 0; i < n && !claimed; i++) set[i]->claimed = 1;
  pthread_mutex_unlock(&iris_nccl_slots_lock);
  if (claimed) { /* another rank's teardown took this one: wait until it is done */
    for (;;) {
      int done;
      pthread_mutex_lock(&c->lock);
      done = c->dropped; /* not before: its real communicator may still carry the barrier */
      pthread_mutex_unlock(&c->lock);
      if (done) break;
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
    free(set);
    free(t);
    return;
  }
  if (n + 1 != c->here) finalize = 0; /* a rank of the set was dropped already */
  for (i = 0; i < n && finalize; i++)
    if (pthread_create(&t[i], NULL, iris_nccl_drop_thread, set[i]) != 0) {
      while (i-- > 0) pthread_join(t[i], NULL); /* cannot meet all: the rest stop without the barrier */
      finalize = 0;
    }
  if (finalize) {
    iris_nccl_drop(c, 1);
    for (i = 0; i < n; i++) pthread_join(t[i], NULL);
  } else {
    for (i = 0; i < n; i++) iris_nccl_drop(set[i], 0);
    iris_nccl_drop(c, 0);
  }
  free(set);
  free(t);
}

/* ============================================================ the collectives == */
static void iris_nccl_note(iris_nccl_comm_t *c, int kind, int route, unsigned long long bytes, ncclDataType_t dt, ncclRedOp_t op) {
  const iris_nccl_options_t *o = iris_nccl_options();
  unsigned long long bit = 1ull << (kind * IRIS_NCCL_ROUTES + route);
  if (!o->debug || (c->noted & bit) || (o->debug < 2 && c->rank != 0)) return;
  c->noted |= bit;
  fprintf(stderr, "iris_nccl: comm %p rank %d of %d: %s of %llu bytes (%s%s%s) -> %s%s\n", (void *)c->comm, c->rank, c->world, iris_nccl_kind_names[kind], bytes,
          iris_nccl_type_name(dt), kind == IRIS_NCCL_AR || kind == IRIS_NCCL_RS ? " " : "",
          kind == IRIS_NCCL_AR || kind == IRIS_NCCL_RS ? iris_nccl_op_name(op) : "", iris_nccl_route_names[route],
          route == IRIS_NCCL_ROUTE_IRIS || route == IRIS_NCCL_ROUTE_NO_IRIS ? "" : " (first such call; later ones are counted)");
}

/* Serve one call with iris if the route says so (*done = 1, the result returned);
 * otherwise *done = 0 and the caller forwards it. */
static ncclResult_t iris_nccl_collective(int kind, const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root, ncclComm_t comm,
                                         cudaStream_t stream, int *done) {
  iris_nccl_comm_t *c = iris_nccl_find(comm);
  iris_dtype_t t = IRIS_UINT8;
  iris_redop_t o = IRIS_SUM;
  unsigned long long bytes = 0;
  iris_status_t st = IRIS_SUCCESS;
  iris_coll_opts_t opts = IRIS_COLL_OPTS_INIT;
  iris_t *ctx;
  int route, old, zc = 0, bad_root = 0;
  char root_why[96] = "";
  cudaError_t copy_err = cudaSuccess;
  *done = 0;
  if (!c) return ncclSuccess;
  if ((old = __atomic_load_n(&c->latched, __ATOMIC_ACQUIRE)) != 0) { /* an async error reported: every collective returns it, as NCCL's */
    pthread_mutex_lock(&iris_nccl_latch_lock);
    iris_nccl_set_error("%s", c->latched_why);
    pthread_mutex_unlock(&iris_nccl_latch_lock);
    *done = 1;
    return (ncclResult_t)old;
  }
  ctx = __atomic_load_n(&c->iris, __ATOMIC_ACQUIRE);
  if (!ctx || c->revoked) route = IRIS_NCCL_ROUTE_NO_IRIS;
  else if (iris_nccl_depth > 0 && !iris_nccl_options()->groups) route = IRIS_NCCL_ROUTE_GROUP;
  else route = iris_nccl_route(kind, &c->table, c->world, count, dt, op, &t, &o, &bytes); /* the root takes no part: every rank routes alike */
  if (route == IRIS_NCCL_ROUTE_IRIS) bad_root = iris_nccl_bad_root(kind, root, c->world, root_why, sizeof root_why);
  if (route == IRIS_NCCL_ROUTE_IRIS) {
    pthread_mutex_lock(&c->lock);
    if ((ctx = c->iris) == NULL) route = IRIS_NCCL_ROUTE_NO_IRIS; /* dropped meanwhile (an abort in another thread) */
    else {
      const size_t es = iris_nccl_type_size(dt);
      old = iris_nccl_enter_device(c->device);
      /* zero-copy on buffers in verified windows; everything else through the staging
       * area, heap memory included (its offsets may differ between ranks) */
      zc = iris_nccl_zero_copy(c->windows, kind, send, recv, count, es, c->world);
      if (!zc) opts.flags |= IRIS_COLL_STAGE;
      opts.ctas = c->max_ctas; /* the SMs the program left to NCCL's kernels (maxCTAs, NCCL_MAX_CTAS), or 0 */
      switch (kind) {
        case IRIS_NCCL_AR: st = iris_all_reduce_ex(ctx, send, recv, count, t, o, stream, &opts); break;
        case IRIS_NCCL_AG: st = iris_all_gather_ex(ctx, send, recv, count, t, stream, &opts); break;
        case IRIS_NCCL_RS: st = iris_reduce_scatter_ex(ctx, send, recv, count, t, o, stream, &opts); break;
        case IRIS_NCCL_BC: {
          /* NCCL reads sendbuff on the root only (elsewhere it may be anything): the others
           * pass recv, and so does every rank when the root is outside [0, world) (then no
           * rank is the root: iris refuses the call before reading any buffer and takes
           * part). Zero-copy: the root first copies send into its recv, so every rank
           * passes recv as both, at the same offset (only recv must be windowed). */
          const void *src = !bad_root && c->rank == root ? send : recv;
          if (zc && src && src != recv) {
            copy_err = cudaMemcpyAsync(recv, src, count * es, cudaMemcpyDeviceToDevice, stream);
            src = recv;
          }
          /* a NULL send on the root is refused (ncclInvalidArgument, as NCCL with
           * NCCL_CHECK_POINTERS=1; without it NCCL's kernel faults) and takes part, like a
           * NULL recv; it is no longer replaced by recv, which broadcast recv's stale bytes */
          st = iris_broadcast_ex(ctx, src, recv, count, t, root, stream, &opts);
          break;
        }
        default: st = iris_all_to_all_ex(ctx, send, recv, count, t, stream, &opts); break;
      }
      if (bad_root && st == IRIS_SUCCESS) st = IRIS_ERROR_INVALID_RANK; /* cannot happen: iris checks the root before any launch */
      if (bad_root && st == IRIS_ERROR_INVALID_RANK) { /* refused by iris, which took part: the peers' call mismatches at once (a
                                                       * context with a fatal fault answers that fault first, as NCCL's async error) */
        iris_nccl_set_error("iris_nccl: broadcast of %zu %s on rank %d of %d: %s (ncclInvalidArgument, as NCCL); iris still took part, so the other "
                            "ranks' broadcast reports a mismatch (ncclCommGetAsyncError: ncclInvalidUsage) instead of waiting: %s",
                            count, iris_nccl_type_name(dt), c->rank, c->world, root_why, iris_error_detail());
      } else if (st != IRIS_SUCCESS)
        iris_nccl_set_error("iris_nccl: %s of %zu %s on rank %d of %d (served by iris) failed: %s", iris_nccl_kind_names[kind], count, iris_nccl_type_name(dt),
                            c->rank, c->world, iris_error_detail());
      else if (copy_err != cudaSuccess) {
        iris_nccl_set_error("iris_nccl: broadcast on rank %d of %d: copying the root's send into its recv failed: %s", c->rank, c->world, cudaGetErrorString(copy_err));
        st = IRIS_ERROR_GPU;
      }
      iris_nccl_leave_device(old, c->device);
    }
    pthread_mutex_unlock(&c->lock);
  }
  iris_nccl_note(c, kind, route, bytes, dt, op);
  if (route != IRIS_NCCL_ROUTE_IRIS) {
    c->forwarded[kind]++;
    return ncclSuccess;
  }
  c->served[kind]++;
  if (zc) c->zero_copy[kind]++;
  *done = 1;
  return iris_nccl_result(st);
}

extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                                       cudaStream_t stream) {
  iris_nccl_fn_ncclAllReduce_t f;
  int done;
  ncclResult_t r = iris_nccl_collective(IRIS_NCCL_AR, sendbuff, recvbuff, count, datatype, op, 0, comm, stream, &done);
  if (done) return r;
  if (!(f = IRIS_NCCL_REAL(ncclAllReduce))) return iris_nccl_missing(IRIS_NCCL_FN_ncclAllReduce);
  return iris_nccl_forwarded(f(sendbuff, recvbuff, count, datatype, op, comm, stream));
}
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                                                       cudaStream_t stream) {
  iris_nccl_fn_ncclAllGather_t f;
  int done;
  ncclResult_t r = iris_nccl_collective(IRIS_NCCL_AG, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream, &done);
  if (done) return r;
  if (!(f = IRIS_NCCL_REAL(ncclAllGather))) return iris_nccl_missing(IRIS_NCCL_FN_ncclAllGather);
  return iris_nccl_forwarded(f(sendbuff, recvbuff, sendcount, datatype, comm, stream));
}
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
                                                           ncclComm_t comm, cudaStream_t stream) {
  iris_nccl_fn_ncclReduceScatter_t f;
  int done;
  ncclResult_t r = iris_nccl_collective(IRIS_NCCL_RS, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream, &done);
  if (done) return r;
  if (!(f = IRIS_NCCL_REAL(ncclReduceScatter))) return iris_nccl_missing(IRIS_NCCL_FN_ncclReduceScatter);
  return iris_nccl_forwarded(f(sendbuff, recvbuff, recvcount, datatype, op, comm, stream));
}
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                                       cudaStream_t stream) {
  iris_nccl_fn_ncclBroadcast_t f;
  int done;
  ncclResult_t r = iris_nccl_collective(IRIS_NCCL_BC, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream, &done);
  if (done) return r;
  if (!(f = IRIS_NCCL_REAL(ncclBroadcast))) return iris_nccl_missing(IRIS_NCCL_FN_ncclBroadcast);
  return iris_nccl_forwarded(f(sendbuff, recvbuff, count, datatype, root, comm, stream));
}
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  iris_nccl_fn_ncclBcast_t f;
  int done;
  ncclResult_t r = iris_nccl_collective(IRIS_NCCL_BC, buff, buff, count, datatype, ncclSum, root, comm, stream, &done);
  if (done) return r;
  if (!(f = IRIS_NCCL_REAL(ncclBcast))) return iris_nccl_missing(IRIS_NCCL_FN_ncclBcast);
  return iris_nccl_forwarded(f(buff, count, datatype, root, comm, stream));
}
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                                                      cudaStream_t stream) {
  iris_nccl_fn_ncclAlltoAll_t f;
  int done;
  ncclResult_t r = iris_nccl_collective(IRIS_NCCL_A2A, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream, &done);
  if (done) return r;
  if (!(f = IRIS_NCCL_REAL(ncclAlltoAll))) return iris_nccl_missing(IRIS_NCCL_FN_ncclAlltoAll);
  return iris_nccl_forwarded(f(sendbuff, recvbuff, count, datatype, comm, stream));
}

/* ==================================================================== memory == */
/* ncclMemAlloc lends blocks of an iris heap when IRIS_NCCL_MEMALLOC is set: the heap of
 * the oldest live iris context on the caller's device (in bring-up order), which the
 * bring-up made IRIS_NCCL_MEMALLOC bytes larger. ncclMemAlloc takes no communicator, so
 * nothing makes ranks allocate alike: a block is used zero-copy only once a window over
 * it was registered by every rank at the same heap offset (iris_nccl_win_decide); any
 * other call on it is staged like a cudaMalloc buffer. What the heap cannot give (it is
 * full, no context yet) comes from the real NCCL. ncclMemFree returns each block to
 * whoever gave it. */
#define IRIS_NCCL_MEM_ALIGN 4096 /* NCCL_WIN_REQUIRED_ALIGNMENT: a window may start at any block */
typedef struct iris_nccl_block {
  char *ptr;
  size_t bytes;
  iris_t *ctx;               /* the context whose heap holds it */
  iris_nccl_comm_t *owner;   /* its communicator's record (records are never freed) */
  struct iris_nccl_block *next;
} iris_nccl_block_t;
/* every block the shim lent, every window it keeps (handles are looked up, never read:
 * an NCCL window handle is a device pointer) */
static pthread_mutex_t iris_nccl_mem_lock = PTHREAD_MUTEX_INITIALIZER;
static iris_nccl_block_t *iris_nccl_blocks;
static iris_nccl_window_t **iris_nccl_wins;
static int iris_nccl_nwins, iris_nccl_cwins;

/* The oldest live context on `device` (bring-up order), or NULL. */
static iris_nccl_comm_t *iris_nccl_lender(int device) {
  iris_nccl_comm_t *best = NULL;
  unsigned k;
  pthread_mutex_lock(&iris_nccl_slots_lock);
  for (k = 0; k < IRIS_NCCL_SLOTS; k++) {
    iris_nccl_comm_t *m = iris_nccl_slots[k];
    if (!m || m == IRIS_NCCL_TOMB || m->device != device || m->revoked || !__atomic_load_n(&m->iris, __ATOMIC_ACQUIRE)) continue;
    if (!best || m->seq < best->seq) best = m;
  }
  pthread_mutex_unlock(&iris_nccl_slots_lock);
  return best;
}
/* 1 if [p, p + bytes) touches a block the shim lent */
static int iris_nccl_is_block(const void *p, size_t bytes) {
  const char *q = (const char *)p;
  iris_nccl_block_t *b;
  int found = 0;
  pthread_mutex_lock(&iris_nccl_mem_lock);
  for (b = iris_nccl_blocks; b && !found; b = b->next) found = q < b->ptr + b->bytes && q + (bytes ? bytes : 1) > b->ptr;
  pthread_mutex_unlock(&iris_nccl_mem_lock);
  return found;
}

#ifdef IRIS_NCCL_HAVE_ncclMemAlloc
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
  iris_nccl_fn_ncclMemAlloc_t f = IRIS_NCCL_REAL(ncclMemAlloc);
  const iris_nccl_options_t *o = iris_nccl_options();
  int dev = -1;
  if (ptr && size > 0 && o->memalloc && !o->disable && cudaGetDevice(&dev) == cudaSuccess) {
    iris_nccl_comm_t *c = iris_nccl_lender(dev);
    iris_nccl_block_t *b = c ? (iris_nccl_block_t *)calloc(1, sizeof *b) : NULL;
    void *p = NULL;
    if (b) {
      cudaStreamCaptureMode mode = iris_nccl_relax(); /* as the shim's other own CUDA work (iris_malloc itself only books the block) */
      pthread_mutex_lock(&c->lock);
      if ((b->ctx = c->iris) != NULL && !c->revoked && iris_malloc_aligned(b->ctx, size, IRIS_NCCL_MEM_ALIGN, &p) == IRIS_SUCCESS) c->lent++;
      else p = NULL;
      pthread_mutex_unlock(&c->lock);
      iris_nccl_unrelax(mode);
    }
    if (p) {
      b->ptr = (char *)p;
      b->bytes = size;
      b->owner = c;
      pthread_mutex_lock(&iris_nccl_mem_lock);
      b->next = iris_nccl_blocks;
      iris_nccl_blocks = b;
      pthread_mutex_unlock(&iris_nccl_mem_lock);
      *ptr = p;
      if (o->debug >= 2) fprintf(stderr, "iris_nccl: ncclMemAlloc(%zu) on GPU %d: from the iris heap of comm %p\n", size, dev, (void *)c->comm);
      return ncclSuccess;
    }
    free(b);
    if (o->debug >= 2)
      fprintf(stderr, "iris_nccl: ncclMemAlloc(%zu) on GPU %d: %s; the real NCCL allocates it\n", size, dev,
              c ? "the iris heap has no room (IRIS_NCCL_MEMALLOC)" : "no iris context on this GPU yet");
  }
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclMemAlloc);
  return iris_nccl_forwarded(f(ptr, size));
}
#endif
#ifdef IRIS_NCCL_HAVE_ncclMemFree
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclMemFree(void *ptr) {
  iris_nccl_fn_ncclMemFree_t f;
  iris_nccl_block_t **pp, *b = NULL;
  if (ptr) {
    pthread_mutex_lock(&iris_nccl_mem_lock);
    for (pp = &iris_nccl_blocks; *pp; pp = &(*pp)->next)
      if ((*pp)->ptr == (char *)ptr) {
        b = *pp;
        *pp = b->next;
        break;
      }
    pthread_mutex_unlock(&iris_nccl_mem_lock);
  }
  if (b) {
    iris_nccl_comm_t *c = b->owner;
    iris_t *last = NULL;
    cudaStreamCaptureMode mode = iris_nccl_relax(); /* iris_free, and iris_finalize of a kept context */
    pthread_mutex_lock(&c->lock);
    if (b->ctx == c->iris || b->ctx == c->parked || b->ctx == c->kept) { /* else: the context was aborted and stays mapped; the block goes with it */
      iris_free(b->ctx, b->ptr);
      if (c->lent > 0) c->lent--;
      if (b->ctx == c->kept && c->lent == 0) {
        last = c->kept;
        c->kept = NULL;
      }
    }
    if (last) { /* its communicator is gone and this was its last block: after iris_abort, a local teardown */
      int old = iris_nccl_enter_device(c->device);
      iris_finalize(last);
      iris_nccl_leave_device(old, c->device);
    }
    pthread_mutex_unlock(&c->lock);
    iris_nccl_unrelax(mode);
    free(b);
    return ncclSuccess;
  }
  if (!(f = IRIS_NCCL_REAL(ncclMemFree))) return iris_nccl_missing(IRIS_NCCL_FN_ncclMemFree);
  return iris_nccl_forwarded(f(ptr));
}
#endif

/* the window behind a handle the shim gave out (removed from the registry when take),
 * or NULL: a handle of the real NCCL's */
static iris_nccl_window_t *iris_nccl_window_of(const void *handle, int take) {
  iris_nccl_window_t *w = NULL;
  int i;
  if (!handle) return NULL;
  pthread_mutex_lock(&iris_nccl_mem_lock);
  for (i = 0; i < iris_nccl_nwins; i++)
    if ((const void *)iris_nccl_wins[i] == handle) {
      w = iris_nccl_wins[i];
      if (take) iris_nccl_wins[i] = iris_nccl_wins[--iris_nccl_nwins];
      break;
    }
  pthread_mutex_unlock(&iris_nccl_mem_lock);
  return w;
}
/* a window out of its communicator's list, then freed (taken from the registry already) */
static void iris_nccl_window_free(iris_nccl_window_t *w) {
  iris_nccl_comm_t *c = (iris_nccl_comm_t *)w->owner;
  iris_nccl_window_t **pp;
  pthread_mutex_lock(&c->lock);
  for (pp = &c->windows; *pp; pp = &(*pp)->next)
    if (*pp == w) {
      *pp = w->next;
      break;
    }
  pthread_mutex_unlock(&c->lock);
  free(w);
}
/* ncclCommDestroy / ncclCommAbort: the communicator's windows go with it, as NCCL's */
static void iris_nccl_forget_windows(iris_nccl_comm_t *c) {
  iris_nccl_window_t *w;
  pthread_mutex_lock(&c->lock);
  w = c->windows;
  c->windows = NULL;
  pthread_mutex_unlock(&c->lock);
  while (w) {
    iris_nccl_window_t *next = w->next;
    if (iris_nccl_window_of(w, 1)) free(w);
    w = next;
  }
}

#ifdef IRIS_NCCL_HAVE_ncclCommWindowRegister
/* Collective (NCCL 2.27+: every rank, with its buffer). Outside a group, on a blocking
 * communicator the shim brought up: the ranks exchange where their buffers lie (one
 * small allgather over the real communicator) and draw one verdict; a window over the
 * shim's memory is kept by the shim (zero-copy if every rank's buffer is at the same
 * heap offset), any other is registered with the real NCCL. Elsewhere (inside a group,
 * a non-blocking or unknown communicator) each rank decides alone: the shim's memory is
 * kept (staged), any other forwarded. */
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags) {
  iris_nccl_fn_ncclCommWindowRegister_t f = IRIS_NCCL_REAL(ncclCommWindowRegister);
  iris_nccl_comm_t *c = iris_nccl_find(comm);
  iris_nccl_win_record_t me, all[IRIS_MAX_RANKS];
  iris_nccl_window_t *w;
  int serve = 0, zc = 0, exchanged = 0;
  /* IRIS_NCCL_MEMALLOC off (alike on every rank): no rank holds the shim's memory, nothing to exchange */
  if (c && win && buff && size > 0 && iris_nccl_options()->memalloc) {
    iris_t *ctx;
    size_t off = 0;
    memset(&me, 0, sizeof me);
    me.magic = IRIS_NCCL_WIN_MAGIC;
    me.bytes = size;
    me.shim = iris_nccl_is_block(buff, size);
    pthread_mutex_lock(&c->lock);
    if ((ctx = c->iris) != NULL && iris_heap_offset(ctx, buff, &off) == IRIS_SUCCESS && size <= iris_heap_size(ctx) - off) {
      me.in_heap = 1;
      me.offset = off;
    }
    if (iris_nccl_depth == 0 && c->blocking && !c->revoked && c->world >= 2 && c->world <= IRIS_MAX_RANKS && c->boot_cap > 0 &&
        iris_nccl_exchange(c, &me, all, sizeof me) == 0) {
      zc = iris_nccl_win_decide(all, c->world, &serve);
      exchanged = 1;
    }
    pthread_mutex_unlock(&c->lock);
    if (!exchanged) serve = me.shim || me.in_heap;
  }
  if (!serve) {
    if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclCommWindowRegister);
    return iris_nccl_forwarded(f(comm, buff, size, win, winFlags));
  }
  if (!(w = (iris_nccl_window_t *)calloc(1, sizeof *w))) {
    /* the peers have kept theirs: this rank's calls are then staged, theirs zero-copy:
     * a mismatch that iris reports; out of host memory, the program fails anyway */
    iris_nccl_set_error("iris_nccl: ncclCommWindowRegister: out of host memory");
    return ncclSystemError;
  }
  w->base = (const char *)buff;
  w->bytes = size;
  w->zero_copy = zc;
  w->owner = c;
  pthread_mutex_lock(&iris_nccl_mem_lock);
  if (iris_nccl_nwins == iris_nccl_cwins) {
    int cap = iris_nccl_cwins ? 2 * iris_nccl_cwins : 64;
    iris_nccl_window_t **p = (iris_nccl_window_t **)realloc(iris_nccl_wins, (size_t)cap * sizeof *p);
    if (p) {
      iris_nccl_wins = p;
      iris_nccl_cwins = cap;
    }
  }
  if (iris_nccl_nwins < iris_nccl_cwins) iris_nccl_wins[iris_nccl_nwins++] = w;
  else w->zero_copy = -1; /* no room to look it up: never used */
  pthread_mutex_unlock(&iris_nccl_mem_lock);
  if (w->zero_copy < 0) {
    free(w);
    iris_nccl_set_error("iris_nccl: ncclCommWindowRegister: out of host memory");
    return ncclSystemError;
  }
  pthread_mutex_lock(&c->lock);
  w->next = c->windows;
  c->windows = w;
  pthread_mutex_unlock(&c->lock);
  *win = (ncclWindow_t)w;
  if (iris_nccl_options()->debug >= 2 || (iris_nccl_options()->debug && c->rank == 0))
    fprintf(stderr, "iris_nccl: comm %p rank %d: window of %zu bytes kept by the shim: %s\n", (void *)c->comm, c->rank, size,
            zc ? "zero-copy (every rank's buffer at the same heap offset)"
               : !exchanged ? "staged (registered inside a group or on a communicator without the exchange)"
                            : "staged (the ranks' buffers are not all at the same offset of this communicator's iris heap)");
  return ncclSuccess;
}
#endif
#ifdef IRIS_NCCL_HAVE_ncclCommWindowDeregister
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  iris_nccl_fn_ncclCommWindowDeregister_t f;
  iris_nccl_window_t *w = iris_nccl_window_of(win, 1);
  if (w) {
    iris_nccl_window_free(w);
    return ncclSuccess;
  }
  if (!(f = IRIS_NCCL_REAL(ncclCommWindowDeregister))) return iris_nccl_missing(IRIS_NCCL_FN_ncclCommWindowDeregister);
  return iris_nccl_forwarded(f(comm, win));
}
#endif

/* NCCL's host pointer functions on a window the shim keeps: a zero-copy window's peer
 * copy is the same heap offset in the peer's heap, mapped here (iris_translate_host);
 * a staged window has none the shim can vouch for (NULL, as NCCL gives for a peer it
 * cannot reach by loads and stores); no multicast. Other windows: the real NCCL. */
static int iris_nccl_window_peer(ncclWindow_t window, size_t offset, int peer, void **out) {
  iris_nccl_window_t *w = iris_nccl_window_of(window, 0);
  iris_nccl_comm_t *c;
  iris_t *ctx;
  if (!w) return 0;
  c = (iris_nccl_comm_t *)w->owner;
  *out = NULL;
  pthread_mutex_lock(&c->lock);
  if (w->zero_copy > 0 && peer >= 0 && offset < w->bytes && (ctx = c->iris) != NULL && iris_translate_host(ctx, w->base + offset, peer, out) != IRIS_SUCCESS)
    *out = NULL;
  pthread_mutex_unlock(&c->lock);
  return 1;
}
#ifdef IRIS_NCCL_HAVE_ncclGetPeerDevicePointer
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void **outPtr) {
  iris_nccl_fn_ncclGetPeerDevicePointer_t f;
  if (outPtr && iris_nccl_window_peer(window, offset, peer, outPtr)) return ncclSuccess;
  if (!(f = IRIS_NCCL_REAL(ncclGetPeerDevicePointer))) return iris_nccl_missing(IRIS_NCCL_FN_ncclGetPeerDevicePointer);
  return iris_nccl_forwarded(f(window, offset, peer, outPtr));
}
#endif
#ifdef IRIS_NCCL_HAVE_ncclGetLsaDevicePointer
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void **outPtr) {
  iris_nccl_fn_ncclGetLsaDevicePointer_t f;
  /* an iris communicator lives on one host: its load/store team is the whole communicator */
  if (outPtr && iris_nccl_window_peer(window, offset, lsaRank, outPtr)) return ncclSuccess;
  if (!(f = IRIS_NCCL_REAL(ncclGetLsaDevicePointer))) return iris_nccl_missing(IRIS_NCCL_FN_ncclGetLsaDevicePointer);
  return iris_nccl_forwarded(f(window, offset, lsaRank, outPtr));
}
#endif
#ifdef IRIS_NCCL_HAVE_ncclGetLsaMultimemDevicePointer
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void **outPtr) {
  iris_nccl_fn_ncclGetLsaMultimemDevicePointer_t f;
  if (outPtr && iris_nccl_window_of(window, 0)) {
    *outPtr = NULL;
    return ncclSuccess;
  }
  if (!(f = IRIS_NCCL_REAL(ncclGetLsaMultimemDevicePointer))) return iris_nccl_missing(IRIS_NCCL_FN_ncclGetLsaMultimemDevicePointer);
  return iris_nccl_forwarded(f(window, offset, outPtr));
}
#endif

/* ===================================================================== groups == */
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclGroupStart() {
  iris_nccl_fn_ncclGroupStart_t f = IRIS_NCCL_REAL(ncclGroupStart);
  ncclResult_t r;
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclGroupStart);
  if ((r = f()) == ncclSuccess) iris_nccl_depth++;
  return iris_nccl_forwarded(r);
}
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclGroupEnd() {
  iris_nccl_fn_ncclGroupEnd_t f = IRIS_NCCL_REAL(ncclGroupEnd);
  ncclResult_t r;
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclGroupEnd);
  r = f();
  if (iris_nccl_depth > 0) iris_nccl_depth--;
  if (iris_nccl_depth == 0) iris_nccl_group_closed(r == ncclSuccess);
  return iris_nccl_forwarded(r);
}
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
  iris_nccl_fn_ncclGroupSimulateEnd_t f = IRIS_NCCL_REAL(ncclGroupSimulateEnd);
  ncclResult_t r;
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclGroupSimulateEnd);
  r = f(simInfo);
  if (iris_nccl_depth > 0) iris_nccl_depth--;
  if (iris_nccl_depth == 0) iris_nccl_group_closed(0); /* simulated: a communicator the group created (NCCL 2.28 runs its init) gets no iris context, alike on every rank */
  return iris_nccl_forwarded(r);
}

/* ============================================================ communicators == */
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  iris_nccl_fn_ncclCommInitRank_t f = IRIS_NCCL_REAL(ncclCommInitRank);
  iris_nccl_comm_t *c;
  ncclResult_t r;
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclCommInitRank);
  r = f(comm, nranks, commId, rank);
  if (r == ncclSuccess && comm && (c = iris_nccl_adopt(*comm, iris_nccl_blocking(NULL, -1))) != NULL) iris_nccl_created(&c, 1);
  return iris_nccl_forwarded(r);
}
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config) {
  iris_nccl_fn_ncclCommInitRankConfig_t f = IRIS_NCCL_REAL(ncclCommInitRankConfig);
  iris_nccl_comm_t *c;
  ncclResult_t r;
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclCommInitRankConfig);
  r = f(comm, nranks, commId, rank, config);
  if ((r == ncclSuccess || r == ncclInProgress) && comm && (c = iris_nccl_adopt(*comm, iris_nccl_blocking(config, -1))) != NULL) {
    c->max_ctas = iris_nccl_config_ctas(config);
    iris_nccl_created(&c, 1);
  }
  return iris_nccl_forwarded(r);
}
#ifdef IRIS_NCCL_HAVE_ncclCommInitRankScalable
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds, ncclConfig_t *config) {
  iris_nccl_fn_ncclCommInitRankScalable_t f = IRIS_NCCL_REAL(ncclCommInitRankScalable);
  iris_nccl_comm_t *c;
  ncclResult_t r;
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclCommInitRankScalable);
  r = f(newcomm, nranks, myrank, nId, commIds, config);
  if ((r == ncclSuccess || r == ncclInProgress) && newcomm && (c = iris_nccl_adopt(*newcomm, iris_nccl_blocking(config, -1))) != NULL) {
    c->max_ctas = iris_nccl_config_ctas(config);
    iris_nccl_created(&c, 1);
  }
  return iris_nccl_forwarded(r);
}
#endif
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
  iris_nccl_fn_ncclCommInitAll_t f = IRIS_NCCL_REAL(ncclCommInitAll);
  ncclResult_t r;
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclCommInitAll);
  r = f(comms, ndev, devlist);
  if (r == ncclSuccess && comms && ndev > 0) {
    iris_nccl_comm_t **cs = (iris_nccl_comm_t **)calloc((size_t)ndev, sizeof *cs);
    int i;
    if (cs) { /* one process holds every rank: each bring-up in a thread of its own */
      for (i = 0; i < ndev; i++) cs[i] = iris_nccl_adopt(comms[i], iris_nccl_blocking(NULL, -1));
      iris_nccl_created(cs, ndev);
      free(cs);
    }
  }
  return iris_nccl_forwarded(r);
}
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
  iris_nccl_fn_ncclCommSplit_t f = IRIS_NCCL_REAL(ncclCommSplit);
  iris_nccl_comm_t *parent = iris_nccl_find(comm), *c;
  ncclResult_t r;
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclCommSplit);
  r = f(comm, color, key, newcomm, config);
  /* config NULL: the child inherits the parent's configuration, blocking included; and
   * the split runs under the parent's blocking (a non-blocking parent: no bring-up) */
  if ((r == ncclSuccess || r == ncclInProgress) && newcomm && *newcomm &&
      (c = iris_nccl_adopt(*newcomm, iris_nccl_blocking(config, config ? -1 : parent ? parent->blocking : -1, parent ? parent->blocking : -1))) != NULL) {
    if (!c->blocking && parent && !parent->blocking)
      snprintf(c->why, sizeof c->why, "split from a non-blocking communicator (NCCL runs ncclCommSplit under the parent's blocking; the child may not be ready)");
    c->max_ctas = config ? iris_nccl_config_ctas(config) : parent ? parent->max_ctas : 0; /* maxCTAs inherited too */
    iris_nccl_created(&c, 1);
  }
  return iris_nccl_forwarded(r);
}
/* A teardown during which ncclCommAbort (another thread) took the communicator: NCCL's
 * abort freed it, so the teardown is not forwarded (it would touch freed memory). */
static ncclResult_t iris_nccl_aborted_meanwhile(iris_nccl_comm_t *c, const char *call) {
  iris_nccl_set_error("iris_nccl: %s on rank %d of %d: ncclCommAbort in another thread aborted the communicator during this teardown; not forwarded", call,
                      c->rank, c->world);
  return ncclInvalidUsage;
}
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  iris_nccl_fn_ncclCommFinalize_t f = IRIS_NCCL_REAL(ncclCommFinalize);
  iris_nccl_comm_t *c = iris_nccl_find(comm);
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclCommFinalize);
  if (c) {
    iris_nccl_report(c, "finalized");
    iris_nccl_teardown(c);
    if (__atomic_load_n(&c->aborting, __ATOMIC_ACQUIRE)) return iris_nccl_aborted_meanwhile(c, "ncclCommFinalize");
  }
  return iris_nccl_forwarded(f(comm));
}
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  iris_nccl_fn_ncclCommDestroy_t f = IRIS_NCCL_REAL(ncclCommDestroy);
  iris_nccl_comm_t *c = iris_nccl_find(comm);
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclCommDestroy);
  if (c) {
    iris_nccl_report(c, "destroyed");
    iris_nccl_teardown(c);
    if (__atomic_load_n(&c->aborting, __ATOMIC_ACQUIRE)) return iris_nccl_aborted_meanwhile(c, "ncclCommDestroy");
    iris_nccl_forget_windows(c);
    iris_nccl_remove(c); /* the record itself stays (a racing reader may hold it) */
  }
  return iris_nccl_forwarded(f(comm));
}
/* Any thread, also while another tears the communicator down (holding c->lock, maybe
 * waiting in its meeting or for its GPU, whose NCCL kernels only NCCL's abort ends): iris's
 * kernels stop, the teardown's meeting gives up, and NCCL's abort runs before this waits
 * for c->lock, once no exchange is enqueuing on the real communicator any more. */
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  iris_nccl_fn_ncclCommAbort_t f = IRIS_NCCL_REAL(ncclCommAbort);
  iris_nccl_comm_t *c = iris_nccl_find(comm);
  ncclResult_t r;
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclCommAbort);
  if (!c) return iris_nccl_forwarded(f(comm));
  __atomic_store_n(&c->aborting, 1, __ATOMIC_RELEASE); /* exchanges give up and enqueue nothing more */
  iris_nccl_stop(c); /* iris's kernels first, then NCCL's */
  pthread_mutex_lock(&c->use); /* an exchange enqueuing now finishes its enqueue: then NCCL may free the communicator */
  pthread_mutex_unlock(&c->use);
  r = f(comm);
  iris_nccl_report(c, "aborted");
  iris_nccl_drop(c, 0);
  if (c->here > 1 && c->here == c->world) iris_nccl_leave_set(c); /* the others' contexts need not wait for it */
  iris_nccl_forget_windows(c);
  iris_nccl_remove(c);
  return iris_nccl_forwarded(r);
}
#ifdef IRIS_NCCL_HAVE_ncclCommRevoke
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  iris_nccl_fn_ncclCommRevoke_t f = IRIS_NCCL_REAL(ncclCommRevoke);
  iris_nccl_comm_t *c = iris_nccl_find(comm);
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclCommRevoke);
  if (c) iris_nccl_stop(c); /* in-flight operations stop: iris's too; later calls go to NCCL, which refuses them */
  return iris_nccl_forwarded(f(comm, revokeFlags));
}
#endif
#ifdef IRIS_NCCL_HAVE_ncclCommShrink
/* The child is NCCL's alone (no iris context). With NCCL_SHRINK_ABORT, NCCL first stops
 * the parent's operations in flight: iris's kernels on the parent's context stop too
 * (iris_abort, before NCCL's abort, as ncclCommAbort does), and later calls on the parent
 * forward to NCCL, as after ncclCommRevoke; its teardown is then local (no barrier). */
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm, ncclConfig_t *config,
                                                        int shrinkFlags) {
  iris_nccl_fn_ncclCommShrink_t f = IRIS_NCCL_REAL(ncclCommShrink);
  iris_nccl_comm_t *c = iris_nccl_find(comm);
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclCommShrink);
#ifdef NCCL_SHRINK_ABORT
  if (c && (shrinkFlags & NCCL_SHRINK_ABORT)) iris_nccl_stop(c);
#endif
  return iris_nccl_forwarded(f(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags));
}
#endif
extern "C" IRIS_NCCL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  iris_nccl_fn_ncclCommGetAsyncError_t f = IRIS_NCCL_REAL(ncclCommGetAsyncError);
  iris_nccl_comm_t *c;
  iris_t *ctx;
  ncclResult_t r;
  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_ncclCommGetAsyncError);
  r = f(comm, asyncError);
  /* NCCL's error first; else the one iris reported before (it stays, as NCCL's); else
   * iris's fault now (a wait that ran out, a dead peer, a mismatch), kept from then on */
  if (r == ncclSuccess && asyncError && *asyncError == ncclSuccess && (c = iris_nccl_find(comm)) != NULL && !c->revoked) {
    const int was = __atomic_load_n(&c->latched, __ATOMIC_ACQUIRE);
    iris_status_t st = IRIS_SUCCESS;
    int latch;
    if (!was && (ctx = __atomic_load_n(&c->iris, __ATOMIC_ACQUIRE)) != NULL) st = iris_get_async_error(ctx); /* non-blocking, any thread */
    const ncclResult_t a = iris_nccl_async_answer(*asyncError, was, st, &latch);
    if (a != ncclSuccess) {
      pthread_mutex_lock(&iris_nccl_latch_lock);
      if (latch && !c->latched) {
        snprintf(c->latched_why, sizeof c->latched_why, "iris_nccl: rank %d of %d: iris reports %s: %s", c->rank, c->world, iris_status_string(st),
                 iris_error_detail());
        __atomic_store_n(&c->latched, (int)a, __ATOMIC_RELEASE);
      }
      iris_nccl_set_error("%s", c->latched_why);
      pthread_mutex_unlock(&iris_nccl_latch_lock);
      *asyncError = (ncclResult_t)__atomic_load_n(&c->latched, __ATOMIC_ACQUIRE);
    }
  }
  return iris_nccl_forwarded(r);
}

/* ==================================================================== errors == */
extern "C" IRIS_NCCL_EXPORT const char *ncclGetErrorString(ncclResult_t result) {
  static const char *const own[] = {"no error", "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
                                    "unhandled system error (run with NCCL_DEBUG=INFO for details)", "internal error - please report this issue to the NCCL developers",
                                    "invalid argument (run with NCCL_DEBUG=WARN for details)", "invalid usage (run with NCCL_DEBUG=WARN for details)",
                                    "remote process exited or there was a network error", "NCCL operation in progress"};
  iris_nccl_fn_ncclGetErrorString_t f = IRIS_NCCL_REAL(ncclGetErrorString);
  if (f) return f(result);
  return (int)result >= 0 && (int)result < (int)(sizeof own / sizeof own[0]) ? own[result] : "unknown result code";
}
extern "C" IRIS_NCCL_EXPORT const char *ncclGetLastError(ncclComm_t comm) {
  iris_nccl_fn_ncclGetLastError_t f;
  if (iris_nccl_err_mine) return iris_nccl_err;
  if (!(f = IRIS_NCCL_REAL(ncclGetLastError))) {
    (void)iris_nccl_missing(IRIS_NCCL_FN_ncclGetLastError);
    return iris_nccl_err;
  }
  return f(comm);
}

/* ================================================================ the shim's own == */
extern "C" IRIS_NCCL_EXPORT ncclResult_t iris_nccl_stats(ncclComm_t comm, iris_nccl_stats_t *out) {
  iris_nccl_comm_t *c;
  int k;
  const size_t v1 = offsetof(iris_nccl_stats_t, zero_copy); /* the struct before the memory counters */
  const size_t v2 = offsetof(iris_nccl_stats_t, ctas);      /* before ctas */
  size_t size;
  iris_nccl_window_t *w;
  if (!out || (out->struct_size != sizeof *out && out->struct_size != v1 && out->struct_size != v2)) {
    iris_nccl_set_error("iris_nccl_stats: out is NULL or its struct_size is not sizeof(iris_nccl_stats_t) = %zu", sizeof(iris_nccl_stats_t));
    return ncclInvalidArgument;
  }
  size = out->struct_size;
  memset((char *)out + sizeof out->struct_size, 0, size - sizeof out->struct_size);
  if (!(c = iris_nccl_find(comm))) {
    snprintf(out->why, sizeof out->why, "%s", iris_nccl_options()->disable ? "IRIS_NCCL_DISABLE is set"
                                                                            : "not a communicator the shim created (or it was destroyed; ncclCommShrink's are NCCL only)");
    return ncclSuccess;
  }
  out->iris = __atomic_load_n(&c->iris, __ATOMIC_ACQUIRE) != NULL && !c->revoked;
  out->rank = c->rank;
  out->world = c->world;
  for (k = 0; k < IRIS_NCCL_KINDS; k++) {
    out->served[k] = c->served[k];
    out->forwarded[k] = c->forwarded[k];
    out->max_bytes[k] = c->table.max_bytes[k];
  }
  snprintf(out->why, sizeof out->why, "%s", out->iris ? "" : c->why[0] ? c->why : c->revoked ? "revoked or aborted" : "not brought up yet");
  if (size == v1) return ncclSuccess;
  for (k = 0; k < IRIS_NCCL_KINDS; k++) out->zero_copy[k] = c->zero_copy[k];
  pthread_mutex_lock(&c->lock);
  for (w = c->windows; w; w = w->next) {
    out->windows++;
    out->windows_zero_copy += w->zero_copy > 0;
  }
  out->heap_blocks = c->lent;
  pthread_mutex_unlock(&c->lock);
  if (size == v2) return ncclSuccess;
  out->ctas = out->iris ? c->max_ctas : 0;
  return ncclSuccess;
}

/* every other function of nccl.h forwards; pnccl* aliases for all */
#define IRIS_NCCL_GEN_STUBS
#include "nccl_shim_gen.h"
