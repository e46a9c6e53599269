/* tests/host/bounds.c: every wait of the rendezvous is bounded by its timeout, also
 * against a rank 0 that listens but never accepts (stopped, hung). */

/* One rank of a world of 2 at <g_dir>/<name> with a 600 ms timeout: its status, its
 * detail in g_res[rank], whether it left *out NULL. */
typedef struct named_arg { char name[40]; } named_arg_t;
static int child_open_600(int rank, void *argp) {
  const named_arg_t *a = (const named_arg_t *)argp;
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = (iris_rendezvous_t *)&p;
  iris_status_t st;
  set_params(&p, a->name, g_dir, rank, 2, 600, 1ULL << 30);
  st = iris_rendezvous_open(&p, &r);
  snprintf(g_res[rank].detail, sizeof g_res[rank].detail, "%s", iris_error_detail());
  g_res[rank].out_null = r == NULL;
  if (st == IRIS_SUCCESS) iris_rendezvous_close(r);
  return (int)st;
}
/* A listener at <g_dir>/<name>.sock that never accepts, its backlog filled: a rank's
 * connect must not wait past its timeout (a blocking connect to a full Unix-socket
 * backlog waits with no bound). */
static void test_rendezvous_full_backlog(void) {
  named_arg_t a;
  struct sockaddr_un sa;
  int lfd, fill[8], nfill = 0, i, codes[1], hung, ranks[1] = {1};
  long long ms;
  unique_name(a.name, sizeof a.name, "full");
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%.60s/%.40s.sock", g_dir, a.name);
  lfd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 0) != 0) {
    check(0, "rendezvous connect to a full backlog is bounded", "listener: %s", strerror(errno));
    if (lfd >= 0) close(lfd);
    return;
  }
  for (i = 0; i < 8; i++) { /* fill the backlog: connects that nobody accepts */
    fill[nfill] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fill[nfill] < 0) break;
    if (connect(fill[nfill], (struct sockaddr *)&sa, sizeof sa) != 0) { close(fill[nfill]); break; }
    nfill++;
  }
  ms = run_children(1, ranks, child_open_600, &a, 5000, codes, &hung);
  check(!hung && codes[0] == IRIS_ERROR_TIMEOUT && g_res[1].out_null && has(g_res[1].detail, "does not accept") && ms < 3000,
        "rendezvous connect to a full backlog is bounded", "hung %d after %lld ms (timeout 600 ms); %s '%s'", hung, ms, sname((iris_status_t)codes[0]),
        g_res[1].detail);
  for (i = 0; i < nfill; i++) close(fill[i]);
  close(lfd);
  unlink(sa.sun_path);
}

/* The rendezvous directory's lock held by a process that never lets go (stopped while it
 * binds, or a lock daemon that is down): rank 0's bind waits at most its timeout, then
 * fails naming the lock file (it waited with no bound: F_SETLKW). */
static void test_rendezvous_dir_lock_held(void) {
  named_arg_t a;
  char path[160];
  int pipefd[2], codes[1], hung, ranks[1] = {0};
  long long ms;
  pid_t holder;
  char c = 0;
  unique_name(a.name, sizeof a.name, "lock");
  snprintf(path, sizeof path, "%.100s/.lock", g_dir);
  if (pipe(pipefd) != 0) { check(0, "rendezvous: a held directory lock is waited for at most the timeout", "pipe: %s", strerror(errno)); return; }
  holder = fork();
  if (holder == 0) { /* takes the lock, says so, and keeps it until killed */
    struct flock fl;
    const int fd = open(path, O_RDWR | O_CREAT, 0600);
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    c = fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0 ? 'y' : 'n';
    if (write(pipefd[1], &c, 1) != 1) _exit(1);
    for (;;) pause();
  }
  if (holder < 0 || read(pipefd[0], &c, 1) != 1 || c != 'y') {
    check(0, "rendezvous: a held directory lock is waited for at most the timeout", "the holder could not take %s", path);
    if (holder > 0) { kill(holder, SIGKILL); waitpid(holder, NULL, 0); }
    close(pipefd[0]); close(pipefd[1]);
    return;
  }
  ms = run_children(1, ranks, child_open_600, &a, 5000, codes, &hung);
  check(!hung && codes[0] == IRIS_ERROR_TIMEOUT && g_res[0].out_null && has(g_res[0].detail, ".lock") && ms < 3000,
        "rendezvous: rank 0's bind waits for a held directory lock at most its timeout, then names the lock", "hung %d after %lld ms (timeout 600 ms); %s '%s'",
        hung, ms, sname((iris_status_t)codes[0]), g_res[0].detail);
  kill(holder, SIGKILL);
  waitpid(holder, NULL, 0);
  close(pipefd[0]);
  close(pipefd[1]);
}

/* An empty rendezvous directory is refused at once, on every rank (it put the socket at
 * "/<name>.sock": rank 0 failed in mkdir, the others waited out their timeout). */
static void test_rendezvous_empty_dir(void) {
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = (iris_rendezvous_t *)&p;
  int ok = 1, rank;
  for (rank = 0; rank < 2; rank++) {
    const long long t0 = now_ms();
    iris_status_t st;
    set_params(&p, "emptydir", "", rank, 2, 2000, 1ULL << 30);
    st = iris_rendezvous_open(&p, &r);
    ok = ok && st == IRIS_ERROR_INVALID_ARGUMENT && r == NULL && has(iris_error_detail(), "empty") && now_ms() - t0 < 500;
    if (st == IRIS_SUCCESS) iris_rendezvous_close(r);
  }
  check(ok, "rendezvous: an empty directory is refused at once on every rank (IRIS_ERROR_INVALID_ARGUMENT)", "%s", iris_error_detail());
}

/* Rank 0 out of descriptors once its socket is bound: its accept fails. The timeout then
 * says so (it spun at full speed and blamed the missing ranks alone). */
typedef struct emfile_arg { char name[40]; char path[160]; } emfile_arg_t;
static void *fill_descriptors(void *argp) { /* once the socket exists: no descriptor left below the limit */
  const emfile_arg_t *a = (const emfile_arg_t *)argp;
  struct stat st;
  struct rlimit rl;
  int fd, hi = 0;
  long long t0 = now_ms();
  while (lstat(a->path, &st) != 0 && now_ms() - t0 < 3000) sleep_ms(1);
  for (fd = 0; fd < 4096; fd++)
    if (fcntl(fd, F_GETFD) != -1) hi = fd;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return NULL;
  rl.rlim_cur = (rlim_t)hi + 1;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return NULL;
  while (open("/dev/null", O_RDONLY) >= 0) {
  }
  return NULL;
}
static int child_emfile(int rank, void *argp) {
  const emfile_arg_t *a = (const emfile_arg_t *)argp;
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = (iris_rendezvous_t *)&p;
  pthread_t th;
  iris_status_t st;
  if (rank == 0 && pthread_create(&th, NULL, fill_descriptors, (void *)a) != 0) return 100;
  if (rank == 1) sleep_ms(300); /* after rank 0 ran out */
  set_params(&p, a->name, g_dir, rank, 2, 900, 1ULL << 30);
  st = iris_rendezvous_open(&p, &r);
  snprintf(g_res[rank].detail, sizeof g_res[rank].detail, "%s", iris_error_detail());
  if (st == IRIS_SUCCESS) iris_rendezvous_close(r);
  return (int)st;
}
static void test_rendezvous_accept_fails(void) {
  emfile_arg_t a;
  int codes[2], hung, ranks[2] = {0, 1};
  long long ms;
  unique_name(a.name, sizeof a.name, "emfile");
  snprintf(a.path, sizeof a.path, "%.100s/%.40s.sock", g_dir, a.name);
  ms = run_children(2, ranks, child_emfile, &a, 5000, codes, &hung);
  check(!hung && codes[0] == IRIS_ERROR_TIMEOUT && has(g_res[0].detail, "could not accept") && has(g_res[0].detail, strerror(EMFILE)) && ms < 3000,
        "rendezvous: rank 0 out of descriptors says its accept failed (and why) when it times out", "hung %d after %lld ms; %s '%s'", hung, ms,
        sname((iris_status_t)codes[0]), g_res[0].detail);
}

/* MASTER_ADDR's resolution is bounded by the rendezvous's timeout (getaddrinfo has no
 * bound of its own), made once, and tried again at most once a second while it fails.
 * The resolver (iris_detail_gai) is replaced by one that counts its calls and, when
 * told, answers only after resolve_sleep_ms, as a resolver that gets no answer. */
static volatile int resolve_calls, resolve_ended, resolve_sleep_ms, resolve_fail;
static int slow_gai(const char *host, const char *port, const struct addrinfo *hints, struct addrinfo **res) {
  int g;
  __sync_fetch_and_add(&resolve_calls, 1);
  if (resolve_sleep_ms) sleep_ms(resolve_sleep_ms);
  g = resolve_fail == 1 ? EAI_AGAIN : resolve_fail == 2 ? EAI_NONAME : getaddrinfo(host, port, hints, res);
  __sync_fetch_and_add(&resolve_ended, 1);
  return g;
}
static iris_status_t open_rank1_tcp(const char *host, int port, int timeout_ms, long long *ms) {
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = (iris_rendezvous_t *)&p;
  iris_status_t st;
  long long t0 = now_ms();
  set_params(&p, "tcp-resolve", NULL, 1, 2, timeout_ms, 1ULL << 30);
  st = iris_rendezvous_open_tcp(&p, host, port, &r);
  *ms = now_ms() - t0;
  if (st == IRIS_SUCCESS) iris_rendezvous_close(r);
  return st;
}
static void test_tcp_resolve_bounded(void) {
  tcp_arg_t a;
  int ranks[2] = {0, 1}, codes[2], hung, i, port = free_port();
  long long ms;
  iris_status_t st;
  iris_detail_gai = slow_gai;
  /* a numeric address asks no resolver: the 2-rank TCP rendezvous meets at once */
  resolve_calls = resolve_ended = resolve_fail = 0;
  resolve_sleep_ms = 5000;
  tcp_init(&a, 2, 5000, 2);
  ms = run_children(2, ranks, child_tcp, &a, 10000, codes, &hung);
  expect_children_ok("tcp resolve: a numeric MASTER_ADDR asks no resolver and meets", 2, ranks, codes, hung, ms);
  check(ms < 3000, "tcp resolve: a numeric MASTER_ADDR meets at once beside a slow resolver", "%lld ms", ms);
  /* a name with no rank 0 listening: resolved once, not at every retry of the dial */
  resolve_sleep_ms = 0;
  st = open_rank1_tcp("localhost", port, 1500, &ms);
  check(st == IRIS_ERROR_TIMEOUT && resolve_calls == 1 && has(iris_error_detail(), "localhost:") && ms >= 1400 && ms < 3000,
        "tcp resolve: a name is resolved once per rendezvous", "%s after %lld ms, %d resolutions: '%s'", sname(st), ms, resolve_calls, iris_error_detail());
  /* a resolver that fails for now: tried again at most once a second */
  resolve_calls = 0;
  resolve_fail = 1;
  st = open_rank1_tcp("localhost", port, 1500, &ms);
  check(st == IRIS_ERROR_TIMEOUT && resolve_calls >= 1 && resolve_calls <= 3 && ms < 3000 && has(iris_error_detail(), "waiting for rank 0 to listen at localhost:"),
        "tcp resolve: a failing resolver is asked at most once a second (then the usual timeout)",
        "%s after %lld ms, %d resolutions: '%s'", sname(st), ms, resolve_calls, iris_error_detail());
  /* a name that does not exist: refused at once, naming it */
  resolve_calls = 0;
  resolve_fail = 2;
  st = open_rank1_tcp("localhost", port, 1500, &ms);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && resolve_calls == 1 && has(iris_error_detail(), "cannot resolve MASTER_ADDR=localhost") && ms < 500,
        "tcp resolve: a name that does not exist is refused at once", "%s after %lld ms, %d resolutions: '%s'", sname(st), ms, resolve_calls, iris_error_detail());
  /* a resolver that does not answer: the timeout, naming the name, within it */
  resolve_calls = resolve_ended = resolve_fail = 0;
  resolve_sleep_ms = 1500;
  st = open_rank1_tcp("localhost", port, 300, &ms);
  check(st == IRIS_ERROR_TIMEOUT && has(iris_error_detail(), "resolving MASTER_ADDR=localhost took too long") && ms < 1000,
        "tcp resolve: a resolver that does not answer ends at the timeout, naming MASTER_ADDR", "%s after %lld ms: '%s'", sname(st), ms, iris_error_detail());
  /* the detached resolver ends on its own and frees what it holds (run under valgrind) */
  for (i = 0; i < 300 && resolve_ended < 1; i++) sleep_ms(10);
  sleep_ms(20);
  check(resolve_ended == 1, "tcp resolve: the abandoned resolver finishes", "%d of %d resolutions ended", resolve_ended, resolve_calls);
  iris_detail_gai = getaddrinfo;
  resolve_sleep_ms = 0;
}
