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
