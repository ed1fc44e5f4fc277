/* test_peek.c -- fg_peek and fg_reset on the memory store with a fake
 * clock, for every algorithm: a peek takes nothing (the checks after it
 * decide as if it never happened), its figures are what checks then find
 * (the units it reports fit and one more does not; a refused unit fits
 * exactly after its retry_after_us; the limit is whole exactly after its
 * reset_us), a reset gives the key its whole limit back, and the
 * blocked-key cache forgets a key that is reset. */
#include <event2/event.h>
#include <stdlib.h>

#include "../harness.h"
#include "floodgate.h"

#define SEC 1000000ull

static uint64_t fake_now;

static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

/* The checks made so far on the key under test, replayed onto fresh
 * stores to ask "what would a check find now" without disturbing the
 * store under test. */
typedef struct op {
    uint64_t at, cost;
} op;

#define MAX_OPS 200

typedef struct history {
    fg_limit lim;
    op ops[MAX_OPS];
    int n;
} history;

/* A fresh store and limiter that have seen the history's checks. */
static fg_limiter *replay(const history *h, fg_store **st)
{
    fg_memory_options o = {.clock = fake_clock};
    *st = fg_store_open_memory(&o, NULL, 0);
    fg_limiter *l = fg_limiter_new(*st, &h->lim, NULL, 0);
    uint64_t saved = fake_now;
    fg_decision d;
    for (int i = 0; i < h->n; i++) {
        fake_now = h->ops[i].at;
        fg_check(l, "k", 1, h->ops[i].cost, &d);
    }
    fake_now = saved;
    return l;
}

/* Would a check of 'cost' at 'at' be allowed after the history? */
static int would_allow(const history *h, uint64_t at, uint64_t cost)
{
    fg_store *st;
    fg_limiter *l = replay(h, &st);
    uint64_t saved = fake_now;
    fg_decision d;
    fake_now = at;
    int rc = fg_check(l, "k", 1, cost, &d);
    fake_now = saved;
    fg_limiter_free(l);
    fg_store_close(st);
    return rc == FG_OK && d.allowed;
}

/* What a peek at 'at' reports after the history. */
static fg_decision peek_at(const history *h, uint64_t at)
{
    fg_store *st;
    fg_limiter *l = replay(h, &st);
    uint64_t saved = fake_now;
    fg_decision d;
    fake_now = at;
    CHECK_EQ(fg_peek(l, "k", 1, &d), FG_OK);
    fake_now = saved;
    fg_limiter_free(l);
    fg_store_close(st);
    return d;
}

static uint64_t capacity(const fg_limit *lim)
{
    return lim->algorithm == FG_TOKEN_BUCKET && lim->burst ? lim->burst
                                                           : lim->limit;
}

/* Random checks on one key, a peek before each: the peeks change nothing
 * (a twin store that is never peeked decides every check the same), and
 * each peek's figures hold. */
static void test_peek_figures(fg_algorithm algo, const char *rate,
                              uint64_t burst)
{
    history h;
    memset(&h, 0, sizeof(h));
    CHECK_EQ(fg_limit_parse(rate, &h.lim), FG_OK);
    h.lim.algorithm = algo;
    h.lim.burst = burst;
    uint64_t cap = capacity(&h.lim);
    fake_now = 1000 * SEC + 12345;
    fg_memory_options o = {.clock = fake_clock};
    fg_store *st = fg_store_open_memory(&o, NULL, 0);
    fg_store *twin_st = fg_store_open_memory(&o, NULL, 0);
    fg_limiter *l = fg_limiter_new(st, &h.lim, NULL, 0);
    fg_limiter *twin = fg_limiter_new(twin_st, &h.lim, NULL, 0);
    CHECK(l && twin);
    if (!l || !twin)
        return;
    unsigned seed = 7 + (unsigned)algo;
    int bad = 0;
    for (int i = 0; i < 60 && !bad; i++) {
        fg_decision p, d, e;
        CHECK_EQ(fg_peek(l, "k", 1, &p), FG_OK);
        CHECK_EQ(p.source, FG_SOURCE_STORE);
        CHECK_EQ(p.limit, cap);
        CHECK_EQ(p.shadowed, 0);
        CHECK(p.remaining <= cap);
        CHECK_EQ(p.allowed, p.remaining > 0);
        CHECK_EQ(p.reset_ms, (p.reset_us + 999) / 1000);
        CHECK_EQ(p.retry_after_ms, (p.retry_after_us + 999) / 1000);
        /* 'remaining' units fit now, one more does not. */
        if (p.remaining)
            CHECK(would_allow(&h, fake_now, p.remaining));
        if (p.remaining < cap)
            CHECK(!would_allow(&h, fake_now, p.remaining + 1));
        /* A refused unit fits exactly after retry_after_us. */
        if (!p.allowed) {
            CHECK(p.retry_after_us > 0);
            CHECK(would_allow(&h, fake_now + p.retry_after_us, 1));
            if (p.retry_after_us > 1)
                CHECK(!would_allow(&h, fake_now + p.retry_after_us - 1, 1));
        } else {
            CHECK_EQ(p.retry_after_us, 0);
        }
        /* Whole again exactly after reset_us. */
        CHECK_EQ(peek_at(&h, fake_now + p.reset_us).remaining, cap);
        if (p.reset_us > 0)
            CHECK(peek_at(&h, fake_now + p.reset_us - 1).remaining < cap);
        else
            CHECK_EQ(p.remaining, cap);
        /* The same check on the store peeked and on its twin. */
        uint64_t cost = 1 + (uint64_t)rand_r(&seed) % (cap < 3 ? cap : 3);
        int rc1 = fg_check(l, "k", 1, cost, &d);
        int rc2 = fg_check(twin, "k", 1, cost, &e);
        CHECK_EQ(rc1, rc2);
        CHECK_EQ(d.allowed, e.allowed);
        CHECK_EQ(d.remaining, e.remaining);
        CHECK_EQ(d.reset_us, e.reset_us);
        CHECK_EQ(d.retry_after_us, e.retry_after_us);
        if (d.allowed != e.allowed || d.remaining != e.remaining) {
            fprintf(stderr, "  %s %s: step %d differs\n",
                    fg_algorithm_name(algo), rate, i);
            bad = 1;
        }
        if (h.n < MAX_OPS)
            h.ops[h.n++] = (op){fake_now, cost};
        /* Mostly small steps (a burst), sometimes a long pause. */
        uint64_t step = (uint64_t)rand_r(&seed) % 4 == 0
                            ? (uint64_t)rand_r(&seed) % (2 * h.lim.period_us)
                            : (uint64_t)rand_r(&seed) % (h.lim.period_us / 8);
        fake_now += step;
    }
    fg_limiter_free(l);
    fg_limiter_free(twin);
    fg_store_close(st);
    fg_store_close(twin_st);
}

/* A peek of a key never seen reads a whole limit and creates nothing. */
static void test_peek_unseen(void)
{
    fg_memory_options o = {.clock = fake_clock};
    fg_store *st = fg_store_open_memory(&o, NULL, 0);
    fg_limit lim;
    fg_limit_parse("10/s", &lim);
    for (int a = FG_FIXED_WINDOW; a <= FG_NAIVE_GET_SET; a++) {
        lim.algorithm = (fg_algorithm)a;
        fg_limiter *l = fg_limiter_new(st, &lim, NULL, 0);
        fg_decision d;
        memset(&d, 0xff, sizeof(d));
        CHECK_EQ(fg_peek(l, "new", 3, &d), FG_OK);
        CHECK_EQ(d.allowed, 1);
        CHECK_EQ(d.remaining, 10);
        CHECK_EQ(d.reset_us, 0);
        CHECK_EQ(d.retry_after_us, 0);
        CHECK_EQ(d.shadowed, 0);
        CHECK_EQ(fg_store_keys(st), 0);
        fg_limiter_free(l);
    }
    fg_store_close(st);
}

/* A reset gives the key its whole limit at once, in every window; other
 * keys and other limits keep theirs. */
static void test_reset(void)
{
    fake_now = 5000 * SEC;
    fg_memory_options o = {.clock = fake_clock};
    fg_store *st = fg_store_open_memory(&o, NULL, 0);
    for (int a = FG_FIXED_WINDOW; a <= FG_NAIVE_GET_SET; a++) {
        fg_limit lim;
        fg_limit_parse("3/h", &lim);
        lim.algorithm = (fg_algorithm)a;
        fg_limiter *l = fg_limiter_new(st, &lim, NULL, 0);
        fg_limiter *other = fg_limiter_new(st, &lim, NULL, 0);
        fg_decision d;
        for (int i = 0; i < 4; i++) {
            fg_check(l, "k", 1, 1, &d);
            fg_check(l, "j", 1, 1, &d);
            fg_check(other, "k", 1, 1, &d);
        }
        CHECK_EQ(d.allowed, 0);
        uint64_t keys = fg_store_keys(st);
        CHECK_EQ(fg_reset(l, "k", 1), FG_OK);
        CHECK_EQ(fg_store_keys(st), keys - 1);
        CHECK_EQ(fg_peek(l, "k", 1, &d), FG_OK);
        CHECK_EQ(d.remaining, 3);
        CHECK_EQ(d.reset_us, 0);
        CHECK_EQ(fg_check(l, "k", 1, 1, &d), FG_OK);
        CHECK_EQ(d.allowed, 1);
        CHECK_EQ(d.remaining, 2);
        /* The others are untouched. */
        CHECK_EQ(fg_peek(l, "j", 1, &d), FG_OK);
        CHECK_EQ(d.remaining, 0);
        CHECK_EQ(fg_peek(other, "k", 1, &d), FG_OK);
        CHECK_EQ(d.remaining, 0);
        /* A key that holds nothing resets to nothing, fine. */
        CHECK_EQ(fg_reset(l, "none", 4), FG_OK);
        fg_limiter_free(l);
        fg_limiter_free(other);
    }
    /* A sliding window's previous window counts too: reset in the next
     * window, the key is whole. */
    fg_limit lim;
    fg_limit_parse("4/s", &lim);
    lim.algorithm = FG_SLIDING_WINDOW;
    fg_limiter *l = fg_limiter_new(st, &lim, NULL, 0);
    fg_decision d;
    fake_now = 7000 * SEC;
    for (int i = 0; i < 4; i++)
        fg_check(l, "s", 1, 1, &d);
    fake_now += SEC + 100000;
    CHECK_EQ(fg_peek(l, "s", 1, &d), FG_OK);
    CHECK(d.remaining < 4);
    CHECK_EQ(fg_reset(l, "s", 1), FG_OK);
    CHECK_EQ(fg_peek(l, "s", 1, &d), FG_OK);
    CHECK_EQ(d.remaining, 4);
    fg_limiter_free(l);
    fg_store_close(st);
}

/* Bad input: no key pointer with a length, a key too long. */
static void test_bad_input(void)
{
    fg_store *st = fg_store_open("memory", NULL, 0);
    fg_limit lim;
    fg_limit_parse("10/s", &lim);
    fg_limiter *l = fg_limiter_new(st, &lim, NULL, 0);
    static char big[FG_MAX_KEY + 1];
    fg_decision d;
    CHECK_EQ(fg_peek(l, big, sizeof(big), &d), FG_EKEY);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.limit, 10);
    CHECK_EQ(fg_reset(l, big, sizeof(big)), FG_EKEY);
    CHECK_EQ(fg_peek(l, NULL, 3, &d), FG_EINVAL);
    CHECK_EQ(fg_reset(l, NULL, 3), FG_EINVAL);
    CHECK_EQ(fg_peek(NULL, "k", 1, &d), FG_EINVAL);
    CHECK_EQ(fg_peek(l, "k", 1, NULL), FG_EINVAL);
    CHECK_EQ(fg_reset(NULL, "k", 1), FG_EINVAL);
    /* An empty key is a key. */
    CHECK_EQ(fg_peek(l, NULL, 0, &d), FG_OK);
    CHECK_EQ(fg_reset(l, "", 0), FG_OK);
    fg_limiter_free(l);
    fg_store_close(st);
}

static int sets_done;
static fg_decision last;

static void on_set(fg_set_req *req)
{
    sets_done++;
    last = req->result.d[req->result.decided];
}

/* Run one asynchronous set of 'l' for 'key' to its end. */
static fg_decision set_of(struct event_base *base, fg_limiter *l,
                          const char *key)
{
    fg_set_item it = {l, key, strlen(key)};
    fg_set_req req;
    int before = sets_done;
    CHECK_EQ(fg_check_set_async(&req, &it, 1, 1, on_set), FG_OK);
    while (sets_done == before)
        event_base_loop(base, EVLOOP_ONCE);
    return last;
}

/* The blocked-key cache forgets a key that is reset: fg_reset through the
 * cache's own limiter, and fg_cache_forget for another limiter's cache of
 * the same limit (another event loop's). */
static void test_reset_forgets_cache(void)
{
    struct event_base *base = event_base_new();
    fg_store *st = fg_store_open_async("memory", base, NULL, 0);
    fg_cache *c = fg_cache_new(64);
    fg_limit lim;
    fg_limit_parse("2/h", &lim);
    lim.algorithm = FG_FIXED_WINDOW;
    fg_limiter *l = fg_limiter_new(st, &lim, NULL, 0);
    fg_limiter_set_cache(l, c);
    fg_decision d;
    for (int i = 0; i < 3; i++)
        d = set_of(base, l, "u");
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(fg_cache_count(c), 1);
    d = set_of(base, l, "u");
    CHECK_EQ(d.source, FG_SOURCE_CACHE);
    CHECK_EQ(fg_reset(l, "u", 1), FG_OK);
    CHECK_EQ(fg_cache_count(c), 0);
    d = set_of(base, l, "u");
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.source, FG_SOURCE_STORE);
    CHECK_EQ(d.remaining, 1);

    /* fg_cache_forget, as serve calls it in each worker after its admin
     * limiter reset the key on the shared store: only the entry of the
     * limiter named goes. */
    fg_limiter *admin = fg_limiter_new(st, &lim, NULL, 0);
    for (int i = 0; i < 2; i++)
        d = set_of(base, l, "v");
    CHECK_EQ(fg_cache_count(c), 1);
    fg_cache_forget(c, admin, "v", 1);
    CHECK_EQ(fg_cache_count(c), 1);
    fg_cache_forget(c, l, "v", 1);
    CHECK_EQ(fg_cache_count(c), 0);
    fg_cache_forget(NULL, l, "v", 1);
    fg_cache_forget(c, l, "never", 5);
    fg_limiter_free(admin);
    fg_limiter_free(l);
    fg_cache_free(c);
    fg_store_close(st);
    event_base_free(base);
}

int main(void)
{
    static const char *const rates[] = {"10/s", "3/250ms", "7/3s"};
    for (int a = FG_FIXED_WINDOW; a <= FG_NAIVE_GET_SET; a++)
        for (size_t r = 0; r < sizeof(rates) / sizeof(rates[0]); r++)
            test_peek_figures((fg_algorithm)a, rates[r], 0);
    test_peek_figures(FG_TOKEN_BUCKET, "10/s", 4);
    test_peek_figures(FG_TOKEN_BUCKET, "3/s", 20);
    test_peek_unseen();
    test_reset();
    test_bad_input();
    test_reset_forgets_cache();
    return TEST_DONE();
}
