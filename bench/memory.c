/* memory.c -- `make bench`: nanoseconds per fg_check on the memory store,
 * beside a baseline loop measured in the same run.
 *
 * The baseline does, plainly, the steps any in-memory limiter takes per
 * check: hash the key, probe an open-addressing table, read the monotonic
 * clock, compare and add. It is a reference, not a lower bound: on many
 * keys the store beats it. Both loops visit the same precomputed key sequence:
 * one hot key, 100,000 keys and 1,000,000 keys at random, on one thread and on
 * two. Two threads check distinct keys: the row's keys split between them,
 * each thread its half (on the hot key, each its own key), so that one
 * thread and two work on stores of the same keys. Each figure is
 * the best of several rounds, and the rounds of the loops alternate, so
 * that a noisy neighbour slows all alike; the rounds of a scaling
 * alternate too (one thread, two threads, each with every loop), and the
 * baseline's own scaling is printed beside fg_check's. Also printed: two
 * threads each on a key set of the row's size (the store then holds twice
 * the keys). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "floodgate.h"
#include "hash.h"
#include "store.h"

#define OPS    2000000u /* checks in a key sequence */
#define SEG    250000u  /* checks in a round: an eighth of the sequence */
#define ROUNDS 40

typedef struct keyset {
    size_t n;
    char (*keys)[32];
    uint32_t *seq; /* OPS indexes into keys */
} keyset;

typedef struct base_slot {
    uint64_t hash;
    const char *key;
    uint64_t window, count;
} base_slot;

/* A baseline table: a slot every 2^spread base_slots, so that a table that
 * both threads write can put one slot to a cache line, as the store does,
 * and no line holds both threads' counts. */
typedef struct base_table {
    size_t mask;
    unsigned spread;
    base_slot *slots;
} base_table;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* 'ks''s key sequence: OPS indexes of its keys at random. */
static void keyset_seq(keyset *ks, uint64_t seed)
{
    ks->seq = malloc(OPS * sizeof(*ks->seq));
    if (!ks->seq) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    uint64_t x = seed | 1;
    for (size_t i = 0; i < OPS; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ks->seq[i] = (uint32_t)(x % ks->n);
    }
}

static void keyset_init(keyset *ks, size_t n, char tag, uint64_t seed)
{
    ks->n = n;
    ks->keys = malloc(n * sizeof(*ks->keys));
    if (!ks->keys) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        snprintf(ks->keys[i], sizeof(ks->keys[i]), "%c:user%08zu", tag, i);
    keyset_seq(ks, seed);
}

/* The 'n' keys of 'full' from key 'off', visited in a sequence of their
 * own: one thread's share of a key set. */
static void keyset_part(keyset *ks, const keyset *full, size_t off, size_t n,
                        uint64_t seed)
{
    ks->n = n;
    ks->keys = full->keys + off;
    keyset_seq(ks, seed);
}

/* A table, at most half full, of the keys of the 'nks' key sets 'ks'; its
 * slots on cache lines. */
static void base_init(base_table *t, const keyset *ks, int nks, unsigned spread)
{
    size_t size = 8, keys = 0;
    for (int k = 0; k < nks; k++)
        keys += ks[k].n;
    while (size < keys * 2)
        size *= 2;
    size_t bytes = (size << spread) * sizeof(base_slot);
    t->mask = size - 1;
    t->spread = spread;
    t->slots = aligned_alloc(64, bytes);
    if (!t->slots) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    memset(t->slots, 0, bytes);
    for (int k = 0; k < nks; k++)
        for (size_t i = 0; i < ks[k].n; i++) {
            uint64_t h = fg__hash(ks[k].keys[i], strlen(ks[k].keys[i]), 42);
            size_t j = h & t->mask;
            while (t->slots[j << spread].key)
                j = (j + 1) & t->mask;
            t->slots[j << spread].hash = h;
            t->slots[j << spread].key = ks[k].keys[i];
        }
}

/* The baseline: a fixed window of 1e9 per second, in a plain table whose
 * spread is a constant here. */
static inline __attribute__((always_inline)) uint64_t
base_run_as(unsigned spread, base_table *t, const keyset *ks, size_t from,
            size_t n)
{
    uint64_t allowed = 0;
    for (size_t i = from; i < from + n; i++) {
        const char *key = ks->keys[ks->seq[i]];
        size_t len = strlen(key);
        uint64_t h = fg__hash(key, len, 42);
        size_t j = h & t->mask;
        while (t->slots[j << spread].hash != h ||
               memcmp(t->slots[j << spread].key, key, len))
            j = (j + 1) & t->mask;
        base_slot *s = &t->slots[j << spread];
        uint64_t w = mono_us() / 1000000u;
        if (s->window != w) {
            s->window = w;
            s->count = 0;
        }
        if (s->count + 1 <= 1000000000u) {
            s->count++;
            allowed++;
        }
    }
    return allowed;
}

static uint64_t base_run(base_table *t, const keyset *ks, size_t from, size_t n)
{
    return t->spread ? base_run_as(1, t, ks, from, n)
                     : base_run_as(0, t, ks, from, n);
}

static uint64_t fg_run(fg_limiter *l, const keyset *ks, size_t from, size_t n)
{
    uint64_t allowed = 0;
    fg_decision d;
    for (size_t i = from; i < from + n; i++) {
        const char *key = ks->keys[ks->seq[i]];
        if (fg_check(l, key, strlen(key), 1, &d) == FG_OK && d.allowed)
            allowed++;
    }
    return allowed;
}

/* Work for one of the two threads: a run of checks, or nothing (ks NULL). */
typedef struct job {
    int baseline;
    base_table *t;
    fg_limiter *l;
    keyset *ks;
    size_t from, n;
    uint64_t t0, t1; /* when it ran */
} job;

/* The two threads live through the whole run, as a server's threads do,
 * so that no round pays for starting threads. */
static job jobs[2];
static pthread_barrier_t go, done;
static int quitting;

static void *worker(void *arg)
{
    job *j = arg;
    for (;;) {
        pthread_barrier_wait(&go);
        if (quitting)
            return NULL;
        if (j->ks) {
            j->t0 = now_ns();
            volatile uint64_t sink = j->baseline
                                         ? base_run(j->t, j->ks, j->from, j->n)
                                         : fg_run(j->l, j->ks, j->from, j->n);
            (void)sink;
            j->t1 = now_ns();
        }
        pthread_barrier_wait(&done);
    }
}

static pthread_t workers[2];

static void workers_start(void)
{
    pthread_barrier_init(&go, NULL, 3);
    pthread_barrier_init(&done, NULL, 3);
    for (int i = 0; i < 2; i++)
        if (pthread_create(&workers[i], NULL, worker, &jobs[i]) != 0) {
            fprintf(stderr, "bench: cannot start a thread\n");
            exit(1);
        }
}

static void workers_stop(void)
{
    quitting = 1;
    pthread_barrier_wait(&go);
    for (int i = 0; i < 2; i++)
        pthread_join(workers[i], NULL);
    pthread_barrier_destroy(&go);
    pthread_barrier_destroy(&done);
}

/* Threads 0 .. 'threads'-1 each run 'n' checks of its own key set from
 * check 'from' ('only' >= 0: that thread alone): nanoseconds per check
 * over the span from the first start to the last end. */
static double run_on(int threads, int only, int baseline, base_table *t,
                     fg_limiter *l, keyset *ks, size_t from, size_t n)
{
    for (int i = 0; i < 2; i++) {
        int on = only >= 0 ? i == only : i < threads;
        jobs[i] = (job){baseline, &t[i], l, on ? &ks[i] : NULL, from, n, 0, 0};
    }
    pthread_barrier_wait(&go);
    pthread_barrier_wait(&done);
    uint64_t t0 = UINT64_MAX, t1 = 0;
    size_t checks = 0;
    for (int i = 0; i < 2; i++)
        if (jobs[i].ks) {
            t0 = jobs[i].t0 < t0 ? jobs[i].t0 : t0;
            t1 = jobs[i].t1 > t1 ? jobs[i].t1 : t1;
            checks += n;
        }
    return (double)(t1 - t0) / (double)checks;
}

/* 0, 1, 2, ...: the order in which fill() visits a key set's keys. */
static uint32_t ascending[OPS];

/* Thread 'thread' checks each of the keys of 'ks' once, so that the store
 * holds them all before any round is measured (a random sequence of OPS
 * checks of a million keys misses 13% of them); then once through the
 * sequence it will run, to warm the caches. */
static void fill(int thread, base_table *t, fg_limiter *l, const keyset *ks)
{
    keyset k[2];
    k[thread] = *ks;
    k[thread].seq = ascending;
    run_on(1, thread, 0, t, l, k, 0, ks->n);
    k[thread].seq = ks->seq;
    run_on(1, thread, 0, t, l, k, 0, OPS);
}

/* The loops a round runs: the baseline on tables of 32-byte slots, fg_check,
 * and the baseline on a table of a slot to a cache line, as in the store. */
enum { LOOP_BASE, LOOP_FG, LOOP_SHARED, LOOPS };

/* What k + 1 threads run: the baseline's tables (t for LOOP_BASE, 'line'
 * for LOOP_SHARED, NULL when that loop is not wanted; an element a
 * thread), the limiter and the threads' key sets. */
typedef struct setup {
    base_table *t, *line;
    fg_limiter *l;
    keyset *ks;
} setup;

/* The best of ROUNDS rounds of each loop on 1 + 'both' thread counts (one
 * thread, then also two: on[k] for k + 1 threads), the rounds alternating
 * between the loops and between the thread counts, so that a busy moment
 * on the host, or a stretch in which it takes the second core, slows all
 * alike: best[k][w] loop w's on k + 1 threads. Rounds are short (a few
 * milliseconds) and many, so that the best of them is a moment when
 * nothing else ran. */
static void measure(int both, const setup *on, double best[][LOOPS])
{
    for (int k = 0; k <= both; k++)
        for (int w = 0; w < LOOPS; w++)
            best[k][w] = 1e18;
    for (int r = 0; r < ROUNDS; r++) {
        size_t from = (size_t)(r % (OPS / SEG)) * SEG;
        for (int k = 0; k <= both; k++)
            for (int w = 0; w < (on[k].line ? LOOPS : LOOP_SHARED); w++) {
                double ns = run_on(k + 1, -1, w != LOOP_FG,
                                   w == LOOP_SHARED ? on[k].line : on[k].t,
                                   on[k].l, on[k].ks, from, SEG);
                if (ns < best[k][w])
                    best[k][w] = ns;
            }
    }
}

/* Each loop's two-thread scaling from measure()'s 'best': one thread's
 * time per check over two threads'. */
static void scaling(double best[][LOOPS], double x[LOOPS])
{
    for (int w = 0; w < LOOPS; w++)
        x[w] = best[0][w] / best[1][w];
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

/* Resident memory per key, less the key, once a store holds a million
 * 15-byte keys; '*keys' the keys it held. */
static double memory_per_key(uint64_t *keys)
{
    const unsigned long n = 1000000;
    char err[256], key[32];
    fg_memory_options mo = {.max_keys = n};
    fg_store *st = fg_store_open_memory(&mo, err, sizeof(err));
    fg_limit lim;
    fg_limit_parse("10/s", &lim);
    fg_limiter *l = st ? fg_limiter_new(st, &lim, err, sizeof(err)) : NULL;
    if (!l) {
        fprintf(stderr, "bench: %s\n", err);
        exit(1);
    }
    long before = rss_kb();
    fg_decision d;
    for (unsigned long i = 0; i < n; i++) {
        int k = snprintf(key, sizeof(key), "user:%010lu", i);
        fg_check(l, key, (size_t)k, 1, &d);
    }
    double per_key =
        (double)(rss_kb() - before) * 1024.0 / (double)fg_store_keys(st);
    *keys = fg_store_keys(st);
    fg_limiter_free(l);
    fg_store_close(st);
    return per_key - 15;
}

/* A limiter of a billion a second on a new store with room for twice
 * the two million keys of the largest row's two key sets, so that nothing
 * is evicted. */
static fg_limiter *bench_limiter(const char *algo, fg_store **st)
{
    char err[256];
    fg_memory_options mo = {.max_keys = 4 * 1000000};
    fg_limit lim;
    fg_limit_parse("1000000000/s", &lim);
    fg_algorithm_parse(algo, &lim.algorithm);
    *st = fg_store_open_memory(&mo, err, sizeof(err));
    fg_limiter *l = *st ? fg_limiter_new(*st, &lim, err, sizeof(err)) : NULL;
    if (!l) {
        fprintf(stderr, "bench: %s\n", err);
        exit(1);
    }
    return l;
}

/* One row's figures for an algorithm, printed once every row has run, as
 * Markdown tables. */
typedef struct result {
    double ns[2][2];          /* [threads - 1][0 baseline, 1 fg_check] */
    double split[LOOPS];      /* two threads vs one, the row's keys split */
    double own[LOOPS];        /* two threads vs one, each its own key set */
    double alone_ns, both_ns; /* one thread on one / both threads' keys */
} result;

static void print_tables(const size_t *sizes, const char **algos,
                         result res[][2], double per_key, uint64_t keys)
{
    printf("## Memory store beside a baseline loop\n\n"
           "What: nanoseconds per `fg_check` on the memory store (a limit of "
           "1,000,000,000/s, so every check is allowed), beside a baseline "
           "loop in the same run that does, plainly, the steps any in-memory "
           "limiter takes per check (hash the key, probe an open-addressing "
           "table, read the monotonic clock, compare and add): a reference, "
           "not a lower bound (on many keys the store beats it). Both visit "
           "the same "
           "precomputed key sequence: one hot key, 100,000 and 1,000,000 keys "
           "at random. Each figure is the best of %d rounds of %u checks, the "
           "rounds of the loops alternating, so that a busy neighbour slows "
           "all alike. Two threads check distinct keys: the row's keys split "
           "between them, each its half (on the hot key, each its own "
           "key).\n\n",
           ROUNDS, SEG);
    printf("| algorithm | keys | threads | baseline ns | fg_check ns | ratio "
           "| target |\n|---|---|---|---|---|---|---|\n");
    for (int si = 0; si < 3; si++)
        for (int ai = 0; ai < 2; ai++)
            for (int t = 0; t < 2; t++)
                printf("| %s | %zu | %d | %.1f | %.1f | %.2f× | %s |\n",
                       algos[ai], sizes[si], t + 1, res[si][ai].ns[t][0],
                       res[si][ai].ns[t][1],
                       res[si][ai].ns[t][1] / res[si][ai].ns[t][0],
                       t == 0 ? "≤ 2×" : "");
    printf("\nTwo threads vs one on the row's keys (the rounds of one and "
           "two threads alternate): each loop's time per check on one thread "
           "over two threads'. The host's second core is not always free: "
           "the baseline's own scaling in the same rounds says how much was "
           "there.\n\n");
    printf("| algorithm | keys | baseline, 32-byte slots | baseline, a slot "
           "to a cache line | fg_check | fg_check ÷ baselines | target |\n"
           "|---|---|---|---|---|---|---|\n");
    for (int si = 0; si < 3; si++)
        for (int ai = 0; ai < 2; ai++) {
            const double *h = res[si][ai].split;
            printf("| %s | %zu%s | %.2f× | %.2f× | %.2f× | %.2f / %.2f | "
                   "≥ 1.6× |\n",
                   algos[ai], sizes[si],
                   sizes[si] > 1 ? ", split" : ", each thread its own",
                   h[LOOP_BASE], h[LOOP_SHARED], h[LOOP_FG],
                   h[LOOP_FG] / h[LOOP_BASE], h[LOOP_FG] / h[LOOP_SHARED]);
        }
    printf("\nTwo threads vs one, each thread its own key set of the row's "
           "size (the store then holds twice the keys; one thread is "
           "measured again on it, so that like is compared with like).\n\n");
    printf("| algorithm | keys a thread | baseline, a table per thread | "
           "baseline, one table of both threads' keys | fg_check | fg_check "
           "÷ baselines | one thread, store of its keys, ns | one thread, "
           "store of both threads' keys, ns |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (int si = 1; si < 3; si++)
        for (int ai = 0; ai < 2; ai++) {
            const result *r = &res[si][ai];
            printf("| %s | %zu | %.2f× | %.2f× | %.2f× | %.2f / %.2f | %.1f "
                   "| %.1f |\n",
                   algos[ai], sizes[si], r->own[LOOP_BASE], r->own[LOOP_SHARED],
                   r->own[LOOP_FG], r->own[LOOP_FG] / r->own[LOOP_BASE],
                   r->own[LOOP_FG] / r->own[LOOP_SHARED], r->alone_ns,
                   r->both_ns);
        }
    printf("\nMemory per key: the growth of resident memory once a store "
           "holds a million 15-byte keys, less the key.\n\n"
           "| keys | bytes per key, less the key | target |\n|---|---|---|\n"
           "| %llu | %.1f | ≤ 128 |\n",
           (unsigned long long)keys, per_key);
}

int main(void)
{
    for (uint32_t i = 0; i < OPS; i++)
        ascending[i] = i;
    uint64_t keys = 0;
    double per_key = memory_per_key(&keys);
    workers_start();
    static const size_t sizes[] = {1, 100000, 1000000};
    const char *algos[] = {"fixed_window", "token_bucket"};
    static result res[3][2];
    for (size_t si = 0; si < 3; si++) {
        size_t n = sizes[si];
        /* ks: a key set of the row's size for each thread; part: the first
         * one's keys in two halves (on the hot key, each thread its own). */
        keyset ks[2], part[2];
        base_table bt[2], shared[2], one[2], line[2];
        keyset_init(&ks[0], n, 'a', 88172645463325252ull);
        keyset_init(&ks[1], n, 'b', 1181783497276652981ull);
        if (n > 1) {
            keyset_part(&part[0], &ks[0], 0, n / 2, 7640891576956012809ull);
            keyset_part(&part[1], &ks[0], n / 2, n - n / 2,
                        13211856346519227251ull);
        } else {
            part[0] = ks[0];
            part[1] = ks[1];
        }
        base_init(&bt[0], &ks[0], 1, 0);
        base_init(&bt[1], &ks[1], 1, 0);
        base_init(&shared[0], ks, 2, 1);
        shared[1] = shared[0];
        base_init(&line[0], n > 1 ? part : ks, 2, 1);
        line[1] = line[0];
        one[0] = one[1] = bt[0];
        for (int ai = 0; ai < 2; ai++) {
            /* The store of one thread's keys, and one the two threads
             * share, each inserting and checking its part of the same
             * keys. */
            fg_store *st, *split;
            fg_limiter *l = bench_limiter(algos[ai], &st);
            fg_limiter *sl = bench_limiter(algos[ai], &split);
            double alone[1][LOOPS], halves[2][LOOPS], own[2][LOOPS];
            fill(0, bt, l, &ks[0]);
            measure(0, (setup[]){{bt, NULL, l, ks}}, alone);
            /* Two threads vs one on the same keys, each store holding them
             * all: one thread checks every key of the row, two threads
             * each their half. The baseline's two tables hold the same
             * keys and are shared the same way (on the hot key, each
             * thread has a key of its own, as below). */
            fill(0, bt, sl, &part[0]);
            fill(1, bt, sl, &part[1]);
            measure(1,
                    (setup[]){{one, line, l, ks},
                              {n > 1 ? one : bt, line, sl, part}},
                    halves);
            /* Each thread its own key set of the row's size: the store
             * then holds twice the keys, and one thread is measured again
             * on it, so that like is compared with like (the baseline
             * twice: a table per thread, and one table of both threads'
             * keys). */
            if (n > 1) {
                fill(1, bt, l, &ks[1]);
                measure(1, (setup[]){{bt, shared, l, ks}, {bt, shared, l, ks}},
                        own);
            }
            result *r = &res[si][ai];
            const double *rows[2] = {alone[0], halves[1]};
            for (int t = 0; t < 2; t++) {
                r->ns[t][0] = rows[t][LOOP_BASE];
                r->ns[t][1] = rows[t][LOOP_FG];
            }
            scaling(halves, r->split);
            if (n > 1) {
                scaling(own, r->own);
                r->alone_ns = alone[0][LOOP_FG];
                r->both_ns = own[0][LOOP_FG];
            }
            fg_limiter_free(l);
            fg_store_close(st);
            fg_limiter_free(sl);
            fg_store_close(split);
        }
        if (n > 1) {
            free(part[0].seq);
            free(part[1].seq);
        }
        for (int i = 0; i < 2; i++) {
            free(ks[i].keys);
            free(ks[i].seq);
            free(bt[i].slots);
        }
        free(shared[0].slots);
        free(line[0].slots);
    }
    workers_stop();
    print_tables(sizes, algos, res, per_key, keys);
    return 0;
}
