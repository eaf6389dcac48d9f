/* test_mysql_tls.c -- simba_mysql.h over TLS, against a MariaDB server whose certificate comes
 * from a throwaway CA, and the bound of the one step that blocks (the handshake). Run by
 * tests/test_mysql_tls.sh, which makes the CA and the certificates with openssl and starts the
 * server on 127.0.0.1:$SIMBA_MYSQL_TLS_PORT with its certificate (subjectAltName IP:127.0.0.1)
 * and require_secure_transport=ON. $SIMBA_MYSQL_TLS_CERTS holds ca.crt, other-ca.crt (a CA
 * that signed nothing of the server's), client.crt and client.key (CN=certuser, a user made
 * REQUIRE X509 by the script).
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_mysql.h"
#include "check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int port;
static char ca[300], other_ca[300], client_crt[300], client_key[300];

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void base_desc(simba_mysql_desc *d) {
    memset(d, 0, sizeof *d);
    d->host = "127.0.0.1";
    d->port = port;
    d->user = "root";
    d->password = "simba";
    d->db = "simba";
    d->table = "tls_mutex";
    d->connect_timeout_ms = 3000;
    d->reconnect_min_ms = 200;
}

/* Drives the loop until a Locker on mutex holds it or ms pass: SIMBA_OK or the lock's error.
   *cipher: the cipher of the backend's connection ("" without TLS); the backend's words in
   err; *longest: the longest single simba_poll, ms. */
static simba_result lock_once(const simba_mysql_desc *d, const char *mutex, int64_t ms, char *cipher, char *err, size_t cap,
                              int64_t *longest) {
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_locker *lk = NULL;
    simba_locker_desc ld;
    simba_result rc;
    int64_t end = mono_ms() + ms, t;
    cipher[0] = err[0] = 0;
    *longest = 0;
    if (simba_loop_new(NULL, &loop) != SIMBA_OK) return SIMBA_ENOMEM;
    rc = simba_mysql_open(loop, d, &be);
    if (rc != SIMBA_OK) {
        snprintf(err, cap, "%s", simba_loop_errmsg(loop));
        simba_loop_free(loop);
        return rc;
    }
    memset(&ld, 0, sizeof ld);
    ld.mutex = mutex;
    ld.ttl_ms = 2000;
    ld.transition_ms = 500;
    rc = simba_locker_new(loop, be, &ld, &lk);
    if (rc == SIMBA_OK) rc = simba_locker_try(lk);
    /* by hand, not simba_locker_lock: every poll is timed */
    while (rc == SIMBA_EAGAIN && mono_ms() < end) {
        struct pollfd fds[8];
        int n = simba_fds(loop, fds, 8);
        (void)poll(fds, (nfds_t)(n > 0 ? n : 0), 20);
        t = mono_ms();
        (void)simba_poll(loop); /* every poll is timed: the handshake may hold any of them */
        if (mono_ms() - t > *longest) *longest = mono_ms() - t;
        rc = simba_locker_try(lk);
    }
    if (rc == SIMBA_EAGAIN) rc = SIMBA_ETIMEDOUT;
    if (rc == SIMBA_OK) {
        simba__my *p = (simba__my *)simba_backend_impl(be);
        const char *c = p->c[0].my ? mysql_get_ssl_cipher(p->c[0].my) : NULL;
        snprintf(cipher, 64, "%s", c ? c : "");
        simba_locker_unlock_wait(lk, 2000);
    }
    snprintf(err, cap, "%s", simba_backend_errmsg(be));
    if (lk) simba_locker_free(lk);
    simba_loop_free(loop);
    return rc;
}

TEST(required_connects_over_tls) {
    simba_mysql_desc d;
    char err[512], cipher[64];
    int64_t longest;
    base_desc(&d);
    d.ssl_mode = "required";
    CHECK_RC(lock_once(&d, "tls-required", 10000, cipher, err, sizeof err, &longest), SIMBA_OK);
    fprintf(stderr, "    cipher %s; longest poll %lld ms (the handshake included)\n", cipher, (long long)longest);
    CHECK(cipher[0] != 0);
    CHECK(longest < 500);
}

TEST(verify_ca_with_the_right_ca_connects) {
    simba_mysql_desc d;
    char err[512], cipher[64];
    int64_t longest;
    base_desc(&d);
    d.ssl_mode = "verify_ca";
    d.ssl_ca = ca;
    CHECK_RC(lock_once(&d, "tls-ca", 10000, cipher, err, sizeof err, &longest), SIMBA_OK);
    CHECK(cipher[0] != 0);
}

TEST(verify_ca_with_the_wrong_ca_fails_in_words) {
    simba_mysql_desc d;
    char err[512], cipher[64];
    int64_t longest;
    base_desc(&d);
    d.ssl_mode = "verify_ca";
    d.ssl_ca = other_ca;
    CHECK_RC(lock_once(&d, "tls-wrong-ca", 1500, cipher, err, sizeof err, &longest), SIMBA_ETIMEDOUT);
    fprintf(stderr, "    (%s)\n", err);
    CHECK(strstr(err, "certificate") != NULL || strstr(err, "verify") != NULL);
}

TEST(verify_identity_with_the_address_in_the_certificate_connects) {
    simba_mysql_desc d;
    char err[512], cipher[64];
    int64_t longest;
    base_desc(&d);
    d.ssl_mode = "verify_identity";
    d.ssl_ca = ca;
    CHECK_RC(lock_once(&d, "tls-identity", 10000, cipher, err, sizeof err, &longest), SIMBA_OK);
    CHECK(cipher[0] != 0);
}

/* the doorbell runs over TLS too: a release reaches the waiter at once, not at its timer */
TEST(a_release_is_pushed_over_tls) {
    simba_loop *loop = NULL;
    simba_backend *be[2] = {NULL, NULL};
    simba_locker *lk[2] = {NULL, NULL};
    simba_locker_desc ld;
    simba_mysql_desc d;
    int64_t t0, end;
    int i;
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK);
    base_desc(&d);
    d.ssl_mode = "verify_identity";
    d.ssl_ca = ca;
    memset(&ld, 0, sizeof ld);
    ld.mutex = "tls-push";
    ld.ttl_ms = 4000;
    ld.transition_ms = 2000;
    for (i = 0; i < 2; i++) {
        REQUIRE(simba_mysql_open(loop, &d, &be[i]) == SIMBA_OK);
        REQUIRE(simba_locker_new(loop, be[i], &ld, &lk[i]) == SIMBA_OK);
    }
    CHECK_RC(simba_locker_lock(lk[0], 10000), SIMBA_OK);
    /* the waiter in line, and both doorbells parked */
    end = mono_ms() + 5000;
    while (mono_ms() < end && (simba_locker_try(lk[1]) != SIMBA_EAGAIN || strcmp(simba_mysql_push(be[1]), "doorbell") != 0 ||
                               strcmp(simba_mysql_push(be[0]), "doorbell") != 0))
        simba_wait(loop, 20);
    for (end = mono_ms() + 300; mono_ms() < end;) simba_wait(loop, 20);
    CHECK_STR(simba_mysql_push(be[1]), "doorbell");
    t0 = mono_ms();
    CHECK_RC(simba_locker_unlock(lk[0]), SIMBA_OK);
    for (end = mono_ms() + 5000; mono_ms() < end && simba_locker_try(lk[1]) == SIMBA_EAGAIN;) simba_wait(loop, 20);
    CHECK_RC(simba_locker_try(lk[1]), SIMBA_OK);
    fprintf(stderr, "    handoff over TLS in %lld ms (the lease is 4 + 2 s)\n", (long long)(mono_ms() - t0));
    CHECK(mono_ms() - t0 < 1000);
    simba_locker_unlock_wait(lk[1], 2000);
    simba_loop_free(loop);
}

/* the server takes TLS only (require_secure_transport): without it the same login that works
   over TLS is refused, in the server's words */
TEST(without_tls_the_server_refuses) {
    simba_mysql_desc d;
    char err[512], cipher[64];
    int64_t longest;
    base_desc(&d);
    CHECK_RC(lock_once(&d, "tls-none", 1500, cipher, err, sizeof err, &longest), SIMBA_ETIMEDOUT);
    fprintf(stderr, "    (%s)\n", err);
    CHECK(strstr(err, "denied") != NULL || strstr(err, "insecure") != NULL);
}

TEST(client_certificate_is_sent) {
    simba_mysql_desc d;
    char err[512], cipher[64];
    int64_t longest;
    base_desc(&d);
    d.user = "certuser";
    d.password = NULL;
    d.ssl_mode = "verify_ca";
    d.ssl_ca = ca;
    d.ssl_cert = client_crt;
    d.ssl_key = client_key;
    CHECK_RC(lock_once(&d, "tls-client", 10000, cipher, err, sizeof err, &longest), SIMBA_OK);
    /* the same user without its certificate: refused by the server (REQUIRE X509) */
    d.ssl_cert = NULL;
    d.ssl_key = NULL;
    CHECK_RC(lock_once(&d, "tls-client-none", 1500, cipher, err, sizeof err, &longest), SIMBA_ETIMEDOUT);
    fprintf(stderr, "    (%s)\n", err);
    CHECK(strstr(err, "denied") != NULL);
}

/* A server that stops answering in the middle of the handshake: it sends MariaDB's greeting
   (TLS offered), reads the client's TLS request and hello, and says nothing more. */
static int stall_fd = -1;
static void *stall_server(void *arg) {
    static const unsigned char greeting_tail[] = "abcdefgh";
    unsigned char g[128], buf[4096];
    size_t n = 0, body;
    int c;
    (void)arg;
    n = 4; /* the packet header goes in front when the length is known */
    g[n++] = 10;
    memcpy(g + n, "5.5.5-10.11.0-MariaDB", 22), n += 22;
    g[n++] = 7, g[n++] = 0, g[n++] = 0, g[n++] = 0; /* connection id */
    memcpy(g + n, greeting_tail, 8), n += 8;
    g[n++] = 0;
    g[n++] = 0x0f, g[n++] = 0xaa; /* capabilities: protocol 41, SSL, secure connection */
    g[n++] = 33;                  /* utf8 */
    g[n++] = 2, g[n++] = 0;       /* status: autocommit */
    g[n++] = 0x0f, g[n++] = 0x00; /* capabilities, upper: multi statements/results, plugin auth */
    g[n++] = 21;
    memset(g + n, 0, 10), n += 10;
    memcpy(g + n, "ijklmnopqrst", 13), n += 13;
    memcpy(g + n, "mysql_native_password", 22), n += 22;
    body = n - 4;
    g[0] = (unsigned char)body, g[1] = (unsigned char)(body >> 8), g[2] = 0, g[3] = 0;
    while ((c = accept(stall_fd, NULL, NULL)) >= 0) {
        if (write(c, g, n) != (ssize_t)n) { close(c); continue; }
        while (read(c, buf, sizeof buf) > 0) {}
        close(c);
    }
    return NULL;
}

/* The one blocking step, bounded: one simba_poll waits at most connect_timeout_ms (whole
   seconds) in the stalled handshake, and the connect fails in words. */
TEST(a_stalled_handshake_blocks_one_poll_at_most_the_connect_timeout) {
    simba_mysql_desc d;
    char err[512], cipher[64];
    int64_t longest;
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    pthread_t th;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    stall_fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(stall_fd >= 0);
    REQUIRE(bind(stall_fd, (struct sockaddr *)&a, sizeof a) == 0);
    REQUIRE(listen(stall_fd, 8) == 0);
    REQUIRE(getsockname(stall_fd, (struct sockaddr *)&a, &al) == 0);
    REQUIRE(pthread_create(&th, NULL, stall_server, NULL) == 0);
    base_desc(&d);
    d.port = ntohs(a.sin_port);
    d.ssl_mode = "required";
    d.connect_timeout_ms = 1000;
    d.reconnect_min_ms = 100;
    d.reconnect_max_ms = 200;
    CHECK_RC(lock_once(&d, "tls-stall", 3500, cipher, err, sizeof err, &longest), SIMBA_ETIMEDOUT);
    fprintf(stderr, "    longest poll %lld ms with connect_timeout_ms 1000 (%s)\n", (long long)longest, err);
    CHECK(longest <= 1000 + 300);
    CHECK(err[0] != 0);
    shutdown(stall_fd, SHUT_RDWR);
    close(stall_fd);
    pthread_join(th, NULL);
}

TEST(desc_refusals_say_why) {
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_mysql_desc d;
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK);
    base_desc(&d);
    d.ssl_mode = "REQUIRED!";
    CHECK_RC(simba_mysql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "ssl_mode \"REQUIRED!\"") != NULL);
    base_desc(&d);
    d.ssl_mode = "verify_ca";
    CHECK_RC(simba_mysql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "needs ssl_ca") != NULL);
    base_desc(&d);
    d.ssl_mode = "required";
    d.ssl_cert = client_crt;
    CHECK_RC(simba_mysql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "ssl_cert and ssl_key together") != NULL);
    simba_loop_free(loop);
}

int main(int argc, char **argv) {
    const char *e = getenv("SIMBA_MYSQL_TLS_PORT"), *c = getenv("SIMBA_MYSQL_TLS_CERTS");
    if (!e || !c) {
        fprintf(stderr, "test_mysql_tls: run it from tests/test_mysql_tls.sh (SIMBA_MYSQL_TLS_PORT, SIMBA_MYSQL_TLS_CERTS)\n");
        return 1;
    }
    port = atoi(e);
    snprintf(ca, sizeof ca, "%s/ca.crt", c);
    snprintf(other_ca, sizeof other_ca, "%s/other-ca.crt", c);
    snprintf(client_crt, sizeof client_crt, "%s/client.crt", c);
    snprintf(client_key, sizeof client_key, "%s/client.key", c);
    CHECK_INIT(argc, argv);
    RUN(desc_refusals_say_why);
    RUN(required_connects_over_tls);
    RUN(verify_ca_with_the_right_ca_connects);
    RUN(verify_ca_with_the_wrong_ca_fails_in_words);
    RUN(verify_identity_with_the_address_in_the_certificate_connects);
    RUN(a_release_is_pushed_over_tls);
    RUN(without_tls_the_server_refuses);
    RUN(client_certificate_is_sent);
    RUN(a_stalled_handshake_blocks_one_poll_at_most_the_connect_timeout);
    return check_report("mysql tls");
}
