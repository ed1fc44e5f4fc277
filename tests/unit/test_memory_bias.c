/* test_memory_bias.c -- the memory store's biased slots: a new key's slot
 * is biased to the thread that inserted it, which enters it without an
 * atomic instruction; another thread takes it back (a revocation) and it
 * is open from then on. Growth keeps a key's bias, an eviction leaves the
 * emptied slot open, a store stops biasing after its budget of
 * revocations, and a thread's mark is given back when it exits. Every
 * count stays exact throughout: a window of a day that the clock (still,
 * or for eviction one that ticks by a millisecond a read) never leaves.
 *
 * Without the expedited membarrier(2) the store biases nothing: then every
 * count is still checked, and nothing may be biased or taken back.
 *
 * Bounded in time: about a second, less work under AddressSanitizer. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "../harness.h"
#include "memory_keys.h"
#include "floodgate.h"
#include "store.h"

#define SEC   1000000ull
#define DAY   (86400 * SEC)
#define LIMIT 1000000u

#define SCALE (TEST_UNDER_ASAN ? 4 : 1)

/* 1 when this process can bias slots (the store opens with 'on' set). */
static int bias_ok;

/* A day-long window that the still clock never leaves. */
static uint64_t still_now = 10 * DAY + SEC;

/* Every read moves time on by a millisecond, so that the keys' ages tell
 * the least recently used. */
static atomic_ullong ticking_now;

static uint64_t ticking_clock(void *ctx)
{
    (void)ctx;
    return atomic_fetch_add(&ticking_now, 1000);
}

/* Microseconds on the monotonic clock: a test that repeats stores stops
 * early on a machine so busy that it would run long. */
static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A thread waiting on another spins a little, then gives the CPU away:
 * the other may be waiting for it. */
static void relax(unsigned *spins)
{
    if (++*spins % 64 == 0)
        sched_yield();
}

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* A store of 'max_keys' read by 'clock' (the still clock when NULL), and
 * a fixed window of LIMIT a day on it; NULL on failure. */
static fg_limiter *open_limiter(uint64_t max_keys, fg_clock_fn clock,
                                fg_store **st)
{
    fg_memory_options o = {.max_keys = max_keys,
                           .clock = clock ? clock : still_clock,
                           .clock_ctx = &still_now};
    fg_limit lim;
    *st = NULL;
    if (fg_limit_parse("1000000/day", &lim) != FG_OK)
        return NULL;
    lim.algorithm = FG_FIXED_WINDOW;
    *st = fg_store_open_memory(&o, NULL, 0);
    fg_limiter *l = *st ? fg_limiter_new(*st, &lim, NULL, 0) : NULL;
    if (!l) {
        fg_store_close(*st);
        *st = NULL;
    }
    return l;
}

static void close_limiter(fg_limiter *l, fg_store *st)
{
    fg_limiter_free(l);
    fg_store_close(st);
}

static fg__mem_bias bias_of(fg_store *st)
{
    fg__mem_bias b;
    fg__store_memory_bias(st, &b);
    return b;
}

/* What a count of biased keys or revocations must be: none where the
 * process cannot bias. */
static uint64_t if_bias(uint64_t n)
{
    return bias_ok ? n : 0;
}

/* Check key 'i' at cost 1: 0 when allowed, with 'used[i]' counted. */
static int check_key(fg_limiter *l, const char *prefix, uint64_t i,
                     uint32_t *used, fg_decision *d)
{
    char key[64];
    size_t len = key_of(prefix, i, key, sizeof(key));
    if (fg_check(l, key, len, 1, d) != FG_OK || !d->allowed)
        return 1;
    used[i]++;
    return 0;
}

static int refund_key(fg_limiter *l, const char *prefix, uint64_t i,
                      uint32_t *used)
{
    char key[64];
    size_t len = key_of(prefix, i, key, sizeof(key));
    if (fg_refund(l, key, len, 1) != FG_OK)
        return 1;
    used[i]--;
    return 0;
}

/* Check key 'i' when 'used' holds every unit taken of it: 0 when allowed
 * with exactly the rest remaining. */
static int check_exact(fg_limiter *l, const char *prefix, uint64_t i,
                       uint32_t *used)
{
    fg_decision d;
    if (check_key(l, prefix, i, used, &d))
        return 1;
    return d.remaining != LIMIT - used[i];
}

/* Check each of keys [lo, hi) once more from this thread: what remains
 * must be the limit less every unit the threads took of it ('a' plus 'b'
 * when given). Returns how many keys are not so; prints the first few. */
static uint64_t verify(fg_limiter *l, const char *prefix, uint64_t lo,
                       uint64_t hi, const uint32_t *a, const uint32_t *b,
                       const char *what)
{
    static int printed;
    uint64_t wrong = 0;
    for (uint64_t i = lo; i < hi; i++) {
        uint64_t used = (uint64_t)a[i] + (b ? b[i] : 0);
        char key[64];
        size_t len = key_of(prefix, i, key, sizeof(key));
        fg_decision d;
        if (fg_check(l, key, len, 1, &d) != FG_OK || !d.allowed ||
            d.remaining != LIMIT - used - 1) {
            wrong++;
            if (printed++ < 8)
                fprintf(stderr, "  %s: key %s: remaining %llu, expected %llu\n",
                        what, key, (unsigned long long)d.remaining,
                        (unsigned long long)(LIMIT - used - 1));
        }
    }
    return wrong;
}

/* ---- agents: threads that stay alive between the steps given them ------
 * A key is biased to its thread's mark, and a mark is lent again when its
 * thread exits: so that a key's owner stays the thread that inserted it,
 * the threads of a test live until it ends. */

struct agent {
    pthread_t t;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void (*fn)(void *);
    void *arg;
    int quit;
};

static void *agent_main(void *p)
{
    struct agent *a = p;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->fn && !a->quit)
            pthread_cond_wait(&a->cv, &a->mu);
        if (!a->fn)
            break;
        void (*fn)(void *) = a->fn;
        void *arg = a->arg;
        pthread_mutex_unlock(&a->mu);
        fn(arg);
        pthread_mutex_lock(&a->mu);
        a->fn = NULL;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

static int agent_start(struct agent *a)
{
    memset(a, 0, sizeof(*a));
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    return pthread_create(&a->t, NULL, agent_main, a);
}

/* Give 'a' a step to run; agent_wait() waits for its end. */
static void agent_post(struct agent *a, void (*fn)(void *), void *arg)
{
    pthread_mutex_lock(&a->mu);
    while (a->fn)
        pthread_cond_wait(&a->cv, &a->mu);
    a->fn = fn;
    a->arg = arg;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

static void agent_wait(struct agent *a)
{
    pthread_mutex_lock(&a->mu);
    while (a->fn)
        pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

static void agent_run(struct agent *a, void (*fn)(void *), void *arg)
{
    agent_post(a, fn, arg);
    agent_wait(a);
}

static void agent_stop(struct agent *a)
{
    pthread_mutex_lock(&a->mu);
    a->quit = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->t, NULL);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
}

/* A step: check keys [lo, hi) of 'prefix', each 'times' in a row, over
 * 'rounds' rounds (in reverse when 'reverse'), refunding one unit of every
 * key whose index is a multiple of 'refund' (when set). With 'exact',
 * 'used' holds every unit taken of these keys (no other thread checks them
 * meanwhile) and each check's remaining must be the rest. */
struct sweep {
    fg_limiter *l;
    const char *prefix;
    uint64_t lo, hi;
    int times, rounds, reverse, refund, exact;
    uint32_t *used;
    uint64_t errors;
};

static void sweep_work(void *arg)
{
    struct sweep *s = arg;
    for (int r = 0; r < (s->rounds ? s->rounds : 1); r++) {
        for (uint64_t n = s->lo; n < s->hi; n++) {
            uint64_t i = s->reverse ? s->hi - 1 - (n - s->lo) : n;
            for (int t = 0; t < (s->times ? s->times : 1); t++) {
                fg_decision d;
                s->errors += (uint64_t)(s->exact ? check_exact(s->l, s->prefix,
                                                               i, s->used)
                                                 : check_key(s->l, s->prefix, i,
                                                             s->used, &d));
            }
            if (s->refund && i % (uint64_t)s->refund == 0)
                s->errors += (uint64_t)refund_key(s->l, s->prefix, i, s->used);
        }
    }
}

/* ---- a thread's own keys -------------------------------------------------
 * One thread inserts every key, checking a random earlier one after each
 * insert, then checks them all three times more: in a store of 64 stripes
 * whose tables each grow a few times, and in one of a single stripe that
 * grows 13 times. Every key stays biased to it (growth keeps the bias),
 * none is taken back, every count exact. */

struct own {
    fg_limiter *l;
    uint64_t n;
    uint32_t *used;
    uint64_t errors;
};

static void own_work(void *arg)
{
    struct own *o = arg;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (uint64_t i = 0; i < o->n; i++) {
        o->errors += (uint64_t)check_exact(o->l, "o", i, o->used);
        uint64_t j = xorshift(&x) % (i + 1);
        o->errors += (uint64_t)check_exact(o->l, "o", j, o->used);
    }
    for (int r = 0; r < 3; r++)
        for (uint64_t i = 0; i < o->n; i++)
            o->errors += (uint64_t)check_exact(o->l, "o", i, o->used);
}

static void test_own_keys(void)
{
    static const struct {
        uint64_t max_keys, n;
    } cases[] = {{100000, 3000}, {2000, 1900}};
    static uint32_t used[3000];
    struct agent a;
    CHECK_EQ(agent_start(&a), 0);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        fg_store *st;
        fg_limiter *l = open_limiter(cases[c].max_keys, NULL, &st);
        CHECK(l != NULL);
        if (!l)
            break;
        memset(used, 0, sizeof(used));
        struct own o = {.l = l, .n = cases[c].n, .used = used};
        agent_run(&a, own_work, &o);
        fg__mem_bias b = bias_of(st);
        CHECK_EQ(o.errors, 0);
        CHECK_EQ(fg_store_keys(st), cases[c].n);
        CHECK_EQ(b.on, bias_ok);
        CHECK_EQ(b.biased, if_bias(cases[c].n));
        CHECK_EQ(b.revoked, 0);
        close_limiter(l, st);
    }
    agent_stop(&a);
    printf("bias: own keys, 3000 in 64 stripes and 1900 in one grown stripe, "
           "%s, none taken back, every count exact\n",
           bias_ok ? "each biased to its thread"
                   : "none biased (no membarrier)");
}

/* ---- taken back under load ----------------------------------------------
 * Thread A inserts the keys; then A takes them in turn and checks each
 * over and over until B has taken it from A, then both check every key
 * for a few rounds more, B refunding some. Every key is taken back once;
 * every count is the sum of both threads' units.
 *
 * B takes a key only once A is on it, and first stops A where it is,
 * with a signal whose handler waits (up to 100 us) for B to have taken
 * the key: about one time in twenty A is stopped inside the slot, as a
 * descheduled thread may be, and B must wait for it to leave (else one of
 * their updates is lost now and then). Store after store, for up to
 * 0.4 s. */

#define TAKE_STORES (48 / SCALE)
#define TAKE_KEYS   128
#define TAKE_MS     400 /* time for the test's stores */
#define STOP_US     100 /* longest a stop lasts */

/* What A and B share. */
struct pair {
    atomic_ullong on;      /* keys A has been on so far */
    atomic_ullong taken;   /* keys B has taken so far */
    atomic_ullong stopped; /* 'on' when A was last stopped */
    pthread_t owner;       /* A */
};

struct take {
    fg_limiter *l;
    struct pair *pair;
    uint32_t used[TAKE_KEYS];
    uint64_t errors, checks, stops;
};

/* What A shares with B while it takes keys in turn, for the signal's
 * handler. */
static _Thread_local struct pair *stopping;

/* SIGUSR1 sent by B: A stops where it is until B has taken its key. Only
 * atomics and clock_gettime, which a handler may use. */
static void stop_handler(int sig)
{
    (void)sig;
    struct pair *p = stopping;
    if (!p)
        return;
    int saved = errno;
    unsigned long long k = atomic_load(&p->on);
    atomic_store(&p->stopped, k);
    uint64_t until = mono_us() + STOP_US;
    while (atomic_load(&p->taken) < k && mono_us() < until)
        ;
    errno = saved;
}

static void take_insert(void *arg)
{
    struct take *t = arg;
    for (uint64_t k = 0; k < TAKE_KEYS; k++)
        t->errors += (uint64_t)check_exact(t->l, "t", k, t->used);
}

static void take_owner(void *arg)
{
    struct take *t = arg;
    struct pair *p = t->pair;
    fg_decision d;
    stopping = p;
    for (uint64_t k = 0; k < TAKE_KEYS; k++) {
        atomic_store(&p->on, k + 1);
        /* The CPU given away only now and then: a thread descheduled to
         * let B run is so at any point, now and then inside the slot. */
        uint64_t n = 0;
        do {
            t->errors += (uint64_t)check_key(t->l, "t", k, t->used, &d);
            if (++n % 4096 == 0)
                sched_yield();
        } while (atomic_load(&p->taken) <= k);
        t->checks += n;
    }
    stopping = NULL;
    for (int r = 0; r < 8; r++)
        for (uint64_t k = 0; k < TAKE_KEYS; k++) {
            t->errors += (uint64_t)check_key(t->l, "t", k, t->used, &d);
            t->checks++;
        }
}

static void take_taker(void *arg)
{
    struct take *t = arg;
    struct pair *p = t->pair;
    fg_decision d;
    for (uint64_t k = 0; k < TAKE_KEYS; k++) {
        unsigned spins = 0;
        while (atomic_load(&p->on) <= k)
            relax(&spins);
        if (pthread_kill(p->owner, SIGUSR1) == 0) {
            /* Until A is stopped, or a while (A may not be running). */
            uint64_t until = mono_us() + 2000;
            while (atomic_load(&p->stopped) <= k && mono_us() < until)
                relax(&spins);
            t->stops += atomic_load(&p->stopped) > k;
        } else {
            /* A moment for A to be inside the slot. */
            for (int spin = 0; spin < 64; spin++)
                (void)atomic_load(&p->on);
        }
        t->errors += (uint64_t)check_key(t->l, "t", k, t->used, &d);
        atomic_store(&p->taken, k + 1);
        t->errors += (uint64_t)check_key(t->l, "t", k, t->used, &d);
        if (k % 3 == 0)
            t->errors += (uint64_t)refund_key(t->l, "t", k, t->used);
        t->checks += 2;
    }
    for (int r = 0; r < 2; r++)
        for (uint64_t k = 0; k < TAKE_KEYS; k++) {
            t->errors += (uint64_t)check_key(t->l, "t", k, t->used, &d);
            if (k % 4 == 1)
                t->errors += (uint64_t)refund_key(t->l, "t", k, t->used);
            t->checks++;
        }
}

static void test_taken_back(void)
{
    static struct take owner, taker;
    static struct pair pair;
    struct agent a, b;
    uint64_t errors = 0, wrong = 0, checks = 0, bad_bias = 0, revoked = 0;
    uint64_t stops = 0, until = mono_us() + TAKE_MS * 1000u;
    int stores = 0;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = stop_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK_EQ(sigaction(SIGUSR1, &sa, &old), 0);
    CHECK_EQ(agent_start(&a), 0);
    CHECK_EQ(agent_start(&b), 0);
    pair.owner = a.t;
    for (; stores < TAKE_STORES && (stores < 2 || mono_us() < until);
         stores++) {
        fg_store *st;
        fg_limiter *l = open_limiter(4096, NULL, &st);
        CHECK(l != NULL);
        if (!l)
            break;
        atomic_store(&pair.on, 0);
        atomic_store(&pair.taken, 0);
        atomic_store(&pair.stopped, 0);
        memset(&owner, 0, sizeof(owner));
        memset(&taker, 0, sizeof(taker));
        owner.l = taker.l = l;
        owner.pair = taker.pair = &pair;
        agent_run(&a, take_insert, &owner);
        fg__mem_bias before = bias_of(st);
        agent_post(&a, take_owner, &owner);
        agent_post(&b, take_taker, &taker);
        agent_wait(&a);
        agent_wait(&b);
        fg__mem_bias after = bias_of(st);
        /* Each key biased to A, then taken back once by B and open from
         * then on. */
        if (before.biased != if_bias(TAKE_KEYS) || before.revoked != 0 ||
            after.revoked != if_bias(TAKE_KEYS) ||
            after.biased != before.biased - after.revoked ||
            after.on != bias_ok) {
            if (bad_bias++ < 5)
                fprintf(stderr,
                        "  store %d: biased %llu then %llu, revoked %llu "
                        "then %llu, on %d\n",
                        stores, (unsigned long long)before.biased,
                        (unsigned long long)after.biased,
                        (unsigned long long)before.revoked,
                        (unsigned long long)after.revoked, after.on);
        }
        revoked += after.revoked;
        stops += taker.stops;
        errors += owner.errors + taker.errors;
        checks += owner.checks + taker.checks;
        wrong +=
            verify(l, "t", 0, TAKE_KEYS, owner.used, taker.used, "taken back");
        close_limiter(l, st);
    }
    agent_stop(&a);
    agent_stop(&b);
    sigaction(SIGUSR1, &old, NULL);
    CHECK(stores >= 2);
    CHECK_EQ(errors, 0);
    CHECK_EQ(wrong, 0);
    CHECK_EQ(bad_bias, 0);
    printf("bias: taken back under load, %d stores of %d keys, %llu checks, "
           "%llu biased slots taken back (%llu with their owner stopped), "
           "every count exact\n",
           stores, TAKE_KEYS, (unsigned long long)checks,
           (unsigned long long)revoked, (unsigned long long)stops);
}

/* ---- taken back during growth ---------------------------------------------
 * One stripe grows 11 times while A inserts its keys one by one, checking
 * a random earlier one after each; meanwhile B checks a random key A has
 * inserted every few inserts (taking it back, refunding some), and in
 * between inserts and checks its own keys (biased to B: a growth by A
 * waits for B to leave them, one by B for A). A waits for B now and then,
 * so that the two overlap on a busy machine too. Fewer keys than the
 * budget of revocations: every key is biased or taken back at the end.
 * Stores are repeated for up to 0.3 s. */

#define GROWTH_STORES (24 / SCALE)
#define GROWTH_A      900
#define GROWTH_B      100
#define GROWTH_STEP   6  /* A's inserts between B's checks of them */
#define GROWTH_WAIT   64 /* A's inserts between its waits for B */
#define GROWTH_MS     300

struct grower {
    fg_limiter *l;
    atomic_uint *inserted; /* keys A has inserted so far */
    atomic_uint *taking;   /* B's checks of A's keys so far */
    uint32_t a[GROWTH_A];  /* units this thread took of A's keys */
    uint32_t b[GROWTH_B];  /* of B's */
    uint64_t errors;
};

static void grow_a(void *arg)
{
    struct grower *g = arg;
    uint64_t x = 0x2545f4914f6cdd1dull;
    unsigned seen = 0;
    fg_decision d;
    for (unsigned i = 0; i < GROWTH_A; i++) {
        g->errors += (uint64_t)check_key(g->l, "a", i, g->a, &d);
        atomic_store_explicit(g->inserted, i + 1, memory_order_release);
        g->errors +=
            (uint64_t)check_key(g->l, "a", xorshift(&x) % (i + 1), g->a, &d);
        if ((i + 1) % GROWTH_WAIT == 0) {
            /* B has checked one of the keys since the last wait: it can
             * (it checks once GROWTH_STEP more are in). */
            unsigned spins = 0;
            while (atomic_load(g->taking) == seen)
                relax(&spins);
            seen = atomic_load(g->taking);
        }
    }
}

static void grow_b(void *arg)
{
    struct grower *g = arg;
    uint64_t x = 0x9e3779b97f4a7c15ull, nb = 0;
    unsigned next = 1, spins = 0;
    fg_decision d;
    for (;;) {
        unsigned n = atomic_load_explicit(g->inserted, memory_order_acquire);
        if (n == GROWTH_A)
            break;
        uint64_t r = xorshift(&x);
        if (n >= next) {
            uint64_t i = r % n;
            g->errors += (uint64_t)check_key(g->l, "a", i, g->a, &d);
            if (r % 3 == 0)
                g->errors += (uint64_t)refund_key(g->l, "a", i, g->a);
            atomic_fetch_add(g->taking, 1);
            next = n + GROWTH_STEP;
        } else if (r % 8 == 1 && nb < GROWTH_B) {
            g->errors += (uint64_t)check_key(g->l, "b", nb++, g->b, &d);
        } else if (nb) {
            g->errors += (uint64_t)check_key(g->l, "b", r % nb, g->b, &d);
        } else {
            relax(&spins);
        }
    }
    while (nb < GROWTH_B)
        g->errors += (uint64_t)check_key(g->l, "b", nb++, g->b, &d);
}

static void test_growth(void)
{
    static struct grower ga, gb;
    struct agent a, b;
    uint64_t errors = 0, wrong = 0, bad_bias = 0, revoked = 0, during = 0;
    uint64_t until = mono_us() + GROWTH_MS * 1000u;
    int stores = 0;
    CHECK_EQ(agent_start(&a), 0);
    CHECK_EQ(agent_start(&b), 0);
    for (; stores < GROWTH_STORES && (stores < 2 || mono_us() < until);
         stores++) {
        fg_store *st;
        fg_limiter *l = open_limiter(1200, NULL, &st);
        CHECK(l != NULL);
        if (!l)
            break;
        atomic_uint inserted = 0, taking = 0;
        memset(&ga, 0, sizeof(ga));
        memset(&gb, 0, sizeof(gb));
        ga.l = gb.l = l;
        ga.inserted = gb.inserted = &inserted;
        ga.taking = gb.taking = &taking;
        agent_post(&a, grow_a, &ga);
        agent_post(&b, grow_b, &gb);
        agent_wait(&a);
        agent_wait(&b);
        fg__mem_bias bi = bias_of(st);
        /* Every key was biased when inserted; A's are taken back at most
         * once each, B's never. */
        if (bi.biased + bi.revoked != if_bias(GROWTH_A + GROWTH_B) ||
            bi.revoked > GROWTH_A || bi.on != bias_ok ||
            fg_store_keys(st) != GROWTH_A + GROWTH_B) {
            if (bad_bias++ < 5)
                fprintf(stderr,
                        "  store %d: biased %llu, revoked %llu, on %d, "
                        "keys %llu\n",
                        stores, (unsigned long long)bi.biased,
                        (unsigned long long)bi.revoked, bi.on,
                        (unsigned long long)fg_store_keys(st));
        }
        revoked += bi.revoked;
        errors += ga.errors + gb.errors;
        during += atomic_load(&taking);
        wrong += verify(l, "a", 0, GROWTH_A, ga.a, gb.a, "growth");
        wrong += verify(l, "b", 0, GROWTH_B, gb.b, NULL, "growth");
        close_limiter(l, st);
    }
    agent_stop(&a);
    agent_stop(&b);
    CHECK(stores >= 2);
    CHECK_EQ(errors, 0);
    CHECK_EQ(wrong, 0);
    CHECK_EQ(bad_bias, 0);
    if (bias_ok)
        CHECK(revoked > 0);
    else
        CHECK_EQ(revoked, 0);
    printf("bias: taken back during growth, %d stores of %d keys, %llu "
           "checks by B while A inserted, %llu biased slots taken back, "
           "every count exact\n",
           stores, GROWTH_A + GROWTH_B, (unsigned long long)during,
           (unsigned long long)revoked);
}

/* ---- the budget of revocations --------------------------------------------
 * A inserts 1100 keys and B checks each once: the 1024th taken back turns
 * biasing off. The rest are still taken back; keys A inserts after that
 * are not biased, so B takes nothing back from them. */

#define BUDGET      1024
#define BUDGET_KEYS 1100
#define BUDGET_MORE 200

static void test_budget(void)
{
    static uint32_t used[BUDGET_KEYS + BUDGET_MORE];
    memset(used, 0, sizeof(used));
    struct agent a, b;
    fg_store *st;
    fg_limiter *l = open_limiter(4096, NULL, &st);
    CHECK(l != NULL);
    if (!l)
        return;
    CHECK_EQ(agent_start(&a), 0);
    CHECK_EQ(agent_start(&b), 0);
    /* One thread at a time, so 'used' is every unit and each check's
     * remaining is known. */
    struct sweep s = {.l = l, .prefix = "q", .exact = 1, .used = used};
    uint64_t errors = 0;
    fg__mem_bias bi;
#define SWEEP(agent, from, to, n)                                              \
    do {                                                                       \
        s.lo = (from);                                                         \
        s.hi = (to);                                                           \
        s.times = (n);                                                         \
        s.errors = 0;                                                          \
        agent_run((agent), sweep_work, &s);                                    \
        errors += s.errors;                                                    \
        bi = bias_of(st);                                                      \
    } while (0)
    SWEEP(&a, 0, BUDGET_KEYS, 1);
    CHECK_EQ(bi.on, bias_ok);
    CHECK_EQ(bi.biased, if_bias(BUDGET_KEYS));
    CHECK_EQ(bi.revoked, 0);
    SWEEP(&b, 0, BUDGET - 1, 1);
    CHECK_EQ(bi.on, bias_ok);
    CHECK_EQ(bi.revoked, if_bias(BUDGET - 1));
    CHECK_EQ(bi.biased, if_bias(BUDGET_KEYS - (BUDGET - 1)));
    SWEEP(&b, BUDGET - 1, BUDGET, 1);
    CHECK_EQ(bi.on, 0);
    CHECK_EQ(bi.revoked, if_bias(BUDGET));
    SWEEP(&b, BUDGET, BUDGET_KEYS, 1);
    CHECK_EQ(bi.on, 0);
    CHECK_EQ(bi.revoked, if_bias(BUDGET_KEYS));
    CHECK_EQ(bi.biased, 0);
    SWEEP(&a, BUDGET_KEYS, BUDGET_KEYS + BUDGET_MORE, 2);
    CHECK_EQ(bi.biased, 0);
    CHECK_EQ(fg_store_keys(st), BUDGET_KEYS + BUDGET_MORE);
    SWEEP(&b, BUDGET_KEYS, BUDGET_KEYS + BUDGET_MORE, 1);
    CHECK_EQ(bi.revoked, if_bias(BUDGET_KEYS));
    SWEEP(&a, 0, BUDGET_KEYS + BUDGET_MORE, 1);
    CHECK_EQ(bi.on, 0);
    CHECK_EQ(bi.biased, 0);
#undef SWEEP
    CHECK_EQ(errors, 0);
    agent_stop(&a);
    agent_stop(&b);
    close_limiter(l, st);
    printf("bias: budget, biasing off after %d of %d keys taken back, %d "
           "keys inserted after it not biased, every count exact\n",
           BUDGET, BUDGET_KEYS, BUDGET_MORE);
}

/* ---- marks given back ---------------------------------------------------
 * Threads one after another, each joined before the next starts, each
 * inserting and checking a key of its own: every key is biased when its
 * thread ends (and stays so, to a mark since lent again). Marks are lent
 * to at most 192 threads at a time: without their return, the threads
 * after those would get none. */

#define MARK_THREADS 400

struct marked {
    fg_limiter *l;
    uint64_t i;
    uint32_t *used;
    uint64_t errors;
};

static void *mark_thread(void *arg)
{
    struct marked *m = arg;
    for (int t = 0; t < 3; t++)
        m->errors += (uint64_t)check_exact(m->l, "m", m->i, m->used);
    return NULL;
}

static void test_marks_returned(void)
{
    static uint32_t used[MARK_THREADS];
    memset(used, 0, sizeof(used));
    fg_store *st;
    fg_limiter *l = open_limiter(1000, NULL, &st);
    CHECK(l != NULL);
    if (!l)
        return;
    uint64_t errors = 0, unbiased = 0, revoked = 0;
    int started = 0;
    for (uint64_t i = 0; i < MARK_THREADS; i++) {
        struct marked m = {.l = l, .i = i, .used = used};
        pthread_t t;
        if (pthread_create(&t, NULL, mark_thread, &m) != 0)
            break;
        pthread_join(t, NULL);
        started++;
        errors += m.errors;
        fg__mem_bias bi = bias_of(st);
        if (bi.biased != if_bias(i + 1)) {
            if (unbiased++ < 3)
                fprintf(stderr, "  thread %llu: %llu keys biased, not %llu\n",
                        (unsigned long long)i, (unsigned long long)bi.biased,
                        (unsigned long long)if_bias(i + 1));
        }
        revoked += bi.revoked;
    }
    CHECK_EQ(started, MARK_THREADS);
    CHECK_EQ(errors, 0);
    CHECK_EQ(unbiased, 0);
    CHECK_EQ(revoked, 0);
    CHECK_EQ(fg_store_keys(st), MARK_THREADS);
    CHECK_EQ(verify(l, "m", 0, MARK_THREADS, used, NULL, "marks"), 0);
    close_limiter(l, st);
    printf("bias: marks given back, %d threads one after another, %s, every "
           "count exact\n",
           MARK_THREADS,
           bias_ok ? "each one's key biased" : "none biased (no membarrier)");
}

/* ---- biasing off --------------------------------------------------------
 * Turned off at open: two threads check the same keys at once, in
 * opposite orders, refunding some; nothing is biased or taken back. Turned
 * on again, new keys are biased (where the process can). */

#define OFF_KEYS 500
#define OFF_MORE 50

static void test_bias_off(void)
{
    static uint32_t ua[OFF_KEYS + OFF_MORE], ub[OFF_KEYS];
    memset(ua, 0, sizeof(ua));
    memset(ub, 0, sizeof(ub));
    fg_store *st;
    fg_limiter *l = open_limiter(4096, NULL, &st);
    CHECK(l != NULL);
    if (!l)
        return;
    fg__store_memory_bias_set(st, 0);
    CHECK_EQ(bias_of(st).on, 0);
    struct agent a, b;
    CHECK_EQ(agent_start(&a), 0);
    CHECK_EQ(agent_start(&b), 0);
    struct sweep sa = {.l = l,
                       .prefix = "x",
                       .hi = OFF_KEYS,
                       .rounds = 20 / SCALE,
                       .used = ua},
                 sb = {.l = l,
                       .prefix = "x",
                       .hi = OFF_KEYS,
                       .rounds = 20 / SCALE,
                       .reverse = 1,
                       .refund = 3,
                       .used = ub};
    agent_post(&a, sweep_work, &sa);
    agent_post(&b, sweep_work, &sb);
    agent_wait(&a);
    agent_wait(&b);
    fg__mem_bias bi = bias_of(st);
    CHECK_EQ(sa.errors + sb.errors, 0);
    CHECK_EQ(bi.on, 0);
    CHECK_EQ(bi.biased, 0);
    CHECK_EQ(bi.revoked, 0);
    CHECK_EQ(verify(l, "x", 0, OFF_KEYS, ua, ub, "bias off"), 0);
    fg__store_memory_bias_set(st, 1);
    CHECK_EQ(bias_of(st).on, bias_ok);
    struct sweep sn = {.l = l,
                       .prefix = "x",
                       .lo = OFF_KEYS,
                       .hi = OFF_KEYS + OFF_MORE,
                       .times = 2,
                       .exact = 1,
                       .used = ua};
    agent_run(&a, sweep_work, &sn);
    bi = bias_of(st);
    CHECK_EQ(sn.errors, 0);
    CHECK_EQ(bi.biased, if_bias(OFF_MORE));
    CHECK_EQ(bi.revoked, 0);
    agent_stop(&a);
    agent_stop(&b);
    close_limiter(l, st);
    printf("bias: off, %d shared keys checked by 2 threads, none biased or "
           "taken back, every count exact\n",
           OFF_KEYS);
}

/* ---- eviction -------------------------------------------------------------
 * A fills a store of 100 keys (biased to A); B then inserts new keys, each
 * evicting the least recently used (A's first): B takes A's slots back to
 * evict or move them. Each key of B is checked three times in a row, its
 * count exact. Then this thread refunds a unit of every key ever inserted,
 * which takes back each one still there without inserting any: nothing is
 * biased. A then inserts more keys, each evicting: each goes into a slot
 * an eviction emptied, which is open, so none is taken from B. */

#define EVICT_STORES 3
#define EVICT_MAX    100
#define EVICT_NEW    400
#define EVICT_MORE   200

static void test_eviction(void)
{
    static uint32_t ua[EVICT_MAX], ub[EVICT_NEW], uc[EVICT_MORE];
    struct agent a, b;
    uint64_t errors = 0, revoked = 0;
    atomic_store(&ticking_now, 10 * DAY + SEC);
    CHECK_EQ(agent_start(&a), 0);
    CHECK_EQ(agent_start(&b), 0);
    for (int rep = 0; rep < EVICT_STORES; rep++) {
        memset(ua, 0, sizeof(ua));
        memset(ub, 0, sizeof(ub));
        memset(uc, 0, sizeof(uc));
        fg_store *st;
        fg_limiter *l = open_limiter(EVICT_MAX, ticking_clock, &st);
        CHECK(l != NULL);
        if (!l)
            break;
        struct sweep fill = {.l = l,
                             .prefix = "e",
                             .hi = EVICT_MAX,
                             .times = 3,
                             .exact = 1,
                             .used = ua},
                     evict = {.l = l,
                              .prefix = "f",
                              .hi = EVICT_NEW,
                              .times = 3,
                              .exact = 1,
                              .used = ub},
                     more = {.l = l,
                             .prefix = "g",
                             .hi = EVICT_MORE,
                             .times = 3,
                             .exact = 1,
                             .used = uc};
        agent_run(&a, sweep_work, &fill);
        fg__mem_bias bi = bias_of(st);
        CHECK_EQ(fg_store_keys(st), EVICT_MAX);
        CHECK_EQ(bi.biased, if_bias(EVICT_MAX));
        agent_run(&b, sweep_work, &evict);
        bi = bias_of(st);
        CHECK(fg_store_keys(st) <= EVICT_MAX);
        CHECK(bi.revoked <= EVICT_MAX);
        if (bias_ok)
            CHECK(bi.revoked > 0);
        else
            CHECK_EQ(bi.revoked, 0);
        CHECK_EQ(bi.on, bias_ok);
        revoked += bi.revoked;
        /* A refund inserts no key: this takes back those still there
         * (their counts are not checked again). */
        uint64_t keys = fg_store_keys(st);
        for (uint64_t i = 0; i < EVICT_MAX + EVICT_NEW; i++) {
            char key[64];
            size_t len = i < EVICT_MAX
                             ? key_of("e", i, key, sizeof(key))
                             : key_of("f", i - EVICT_MAX, key, sizeof(key));
            errors += fg_refund(l, key, len, 1) != FG_OK;
        }
        fg__mem_bias open = bias_of(st);
        CHECK_EQ(fg_store_keys(st), keys);
        CHECK_EQ(open.biased, 0);
        agent_run(&a, sweep_work, &more);
        bi = bias_of(st);
        CHECK(fg_store_keys(st) <= EVICT_MAX);
        if (bi.revoked != open.revoked)
            fprintf(stderr,
                    "  store %d: %llu slots taken back by inserts into "
                    "emptied slots\n",
                    rep, (unsigned long long)(bi.revoked - open.revoked));
        CHECK_EQ(bi.revoked, open.revoked);
        errors += fill.errors + evict.errors + more.errors;
        close_limiter(l, st);
    }
    agent_stop(&a);
    agent_stop(&b);
    CHECK_EQ(errors, 0);
    /* Still within the day's window: nothing was reset by time. */
    CHECK(atomic_load(&ticking_now) < 11 * DAY);
    printf("bias: eviction, %d stores of %d keys, %d new keys each evicting, "
           "%llu biased slots taken back, emptied slots open, every count "
           "exact\n",
           EVICT_STORES, EVICT_MAX, EVICT_NEW + EVICT_MORE,
           (unsigned long long)revoked);
}

int main(void)
{
    fg_store *st;
    fg_limiter *l = open_limiter(1000, NULL, &st);
    CHECK(l != NULL);
    if (!l)
        return TEST_DONE();
    bias_ok = bias_of(st).on;
    close_limiter(l, st);
    if (!bias_ok)
        printf("bias: not available (no expedited membarrier): checking that "
               "nothing is biased, and every count\n");
    test_own_keys();
    test_taken_back();
    test_growth();
    test_budget();
    test_marks_returned();
    test_bias_off();
    test_eviction();
    return TEST_DONE();
}
