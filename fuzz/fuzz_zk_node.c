/* fuzz_zk_node.c -- what the ZooKeeper backend reads from the server: child names of a
 * mutex node (simba__zk_cb_list picks the lowest, ours and our predecessor by
 * "n-<tag>-<sequence>"), node data (simba__zk_cb_get copies it, simba__zk_parse reads
 * "<tag> <session ms> <contender>"). The completion callbacks run against a stand-in backend
 * record (its queue and wake-up pipe only), as libzookeeper's completion thread would call them.
 * Input: first line = our tag, then one child name per line; the whole input is also the
 * node data. */
#define SIMBA_IMPLEMENTATION
#include "../simba_zk.h"
#include <assert.h>
#include <stdlib.h>

static simba__zk zk;
static int ready;

static void setup(void) {
    int fd[2];
    if (ready) return;
    memset(&zk, 0, sizeof zk);
    pthread_mutex_init(&zk.mu, NULL);
    if (pipe(fd) != 0) abort();
    zk.pipe_r = fd[0];
    zk.pipe_w = fd[1];
    ready = 1;
}

static void unqueue(void) { /* take the op back out of the queue, empty the pipe */
    char c;
    zk.done_head = zk.done_tail = NULL;
    if (zk.signalled && read(zk.pipe_r, &c, 1) != 1) abort();
    zk.signalled = 0;
}

static int nul_in(const char *s, size_t cap) { return memchr(s, 0, cap) != NULL; }

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    simba__zk_op *op = (simba__zk_op *)calloc(1, sizeof *op);
    char *buf = (char *)malloc(size + 1), *p, *line;
    char *names[256];
    struct String_vector sv;
    int n = 0;
    setup();
    memcpy(buf, data, size);
    buf[size] = 0;
    op->zk = &zk;

    /* node data */
    simba__zk_cb_get(ZOK, (const char *)data, (int)size, NULL, op);
    unqueue();
    assert(strlen(op->data) <= SIMBA__ZK_DATA_MAX);
    {
        simba__zk_data d;
        if (simba__zk_parse(op->data, op->datalen, &d)) {
            assert(simba_id_check(d.id) == SIMBA_OK);
            assert(d.timeout >= 0 && d.timeout <= 10000000000LL);
            assert(d.value_len <= SIMBA_VALUE_MAX);
            {
                simba_reply rep;
                simba__zk_owner_reply(&rep, d.id, d.timeout, 1, d.value, d.value_len);
                assert(rep.transition_left_ms >= rep.ttl_left_ms);
                assert(rep.value_len == d.value_len);
            }
        }
    }

    /* children */
    line = buf;
    p = strchr(line, '\n');
    if (p) *p = 0;
    simba__copy(op->tag, sizeof op->tag, line);
    while (p && n < 256) {
        line = p + 1;
        p = strchr(line, '\n');
        if (p) *p = 0;
        names[n++] = line;
    }
    sv.count = n;
    sv.data = names;
    simba__zk_cb_list(ZOK, &sv, op);
    unqueue();
    assert(op->count <= n);
    assert(nul_in(op->lowest, sizeof op->lowest) && nul_in(op->mine, sizeof op->mine) &&
           nul_in(op->pred, sizeof op->pred));
    assert(op->nextra <= SIMBA__ZK_EXTRA_MAX);
    if (op->mine[0]) assert(op->lowest[0]);
    {
        int i;
        for (i = 0; i < n; i++) {
            const char *t;
            size_t tl;
            long long s = simba__zk_seq(names[i], &t, &tl);
            if (s >= 0) assert(t >= names[i] && t + tl <= names[i] + strlen(names[i]));
        }
    }
    free(buf);
    free(op);
    return 0;
}
