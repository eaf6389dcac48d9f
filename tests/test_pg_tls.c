/* test_pg_tls.c -- simba_pg.h over TLS, against a PostgreSQL server whose certificate comes from
 * a throwaway CA. Run by tests/test_pg_tls.sh, which makes the CA and the certificates with
 * openssl and starts the server on 127.0.0.1:$SIMBA_PG_TLS_PORT with ssl=on and a pg_hba.conf
 * that takes TLS connections only: scram-sha-256 for every user but certuser, who logs in by
 * client certificate (CN=certuser). $SIMBA_PG_TLS_CERTS holds ca.crt, other-ca.crt (a CA that
 * signed nothing of the server's), client.crt and client.key. The certificate names the host
 * simba-tls.test, which resolves nowhere: the backend connects to hostaddr and checks the name.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_pg.h"
#include "check.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int port;
static char ca[300], other_ca[300], client_crt[300], client_key[300];

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void base_desc(simba_pg_desc *d) {
    memset(d, 0, sizeof *d);
    d->hostaddr = "127.0.0.1";
    d->port = port;
    d->user = "postgres";
    d->password = "simba";
    d->dbname = "postgres";
    d->connect_timeout_ms = 3000;
    d->reconnect_min_ms = 200;
}

/* Drives the loop until a Locker on mutex holds it or ms pass: SIMBA_OK or the lock's error;
   *tls: the backend's connection runs TLS; the backend's words in err. */
static simba_result lock_once(const simba_pg_desc *d, const char *mutex, int64_t ms, int *tls, char *err, size_t cap) {
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_locker *lk = NULL;
    simba_locker_desc ld;
    simba_result rc;
    *tls = 0;
    err[0] = 0;
    if (simba_loop_new(NULL, &loop) != SIMBA_OK) return SIMBA_ENOMEM;
    rc = simba_pg_open(loop, d, &be);
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
    if (rc == SIMBA_OK) rc = simba_locker_lock(lk, ms);
    if (rc == SIMBA_OK) {
        simba__pg *p = (simba__pg *)simba_backend_impl(be);
        *tls = p->conn && PQsslInUse(p->conn);
        simba_locker_unlock_wait(lk, 2000);
    }
    snprintf(err, cap, "%s", simba_backend_errmsg(be));
    if (lk) simba_locker_free(lk);
    simba_loop_free(loop);
    return rc;
}

TEST(verify_full_with_the_right_ca_connects) {
    simba_pg_desc d;
    char err[512];
    int tls;
    base_desc(&d);
    d.sslmode = "verify-full";
    d.sslrootcert = ca;
    d.tls_name = "simba-tls.test";
    CHECK_RC(lock_once(&d, "tls-right", 10000, &tls, err, sizeof err), SIMBA_OK);
    CHECK(tls);
}

TEST(verify_full_with_the_wrong_ca_fails_in_words) {
    simba_pg_desc d;
    char err[512];
    int tls;
    int64_t t0 = mono_ms();
    base_desc(&d);
    d.sslmode = "verify-full";
    d.sslrootcert = other_ca;
    d.tls_name = "simba-tls.test";
    CHECK_RC(lock_once(&d, "tls-wrong-ca", 1500, &tls, err, sizeof err), SIMBA_ETIMEDOUT);
    fprintf(stderr, "    (%s)\n", err);
    CHECK(strstr(err, "certificate verify failed") != NULL);
    CHECK(mono_ms() - t0 < 5000);
}

TEST(verify_full_with_another_name_fails_in_words) {
    simba_pg_desc d;
    char err[512];
    int tls;
    base_desc(&d);
    d.sslmode = "verify-full";
    d.sslrootcert = ca;
    d.tls_name = "not-the-server.test";
    CHECK_RC(lock_once(&d, "tls-wrong-name", 1500, &tls, err, sizeof err), SIMBA_ETIMEDOUT);
    fprintf(stderr, "    (%s)\n", err);
    CHECK(strstr(err, "does not match host name") != NULL);
}

/* verify-ca checks the chain only: the address alone will do */
TEST(verify_ca_needs_no_name) {
    simba_pg_desc d;
    char err[512];
    int tls;
    base_desc(&d);
    d.sslmode = "verify-ca";
    d.sslrootcert = ca;
    CHECK_RC(lock_once(&d, "tls-ca", 10000, &tls, err, sizeof err), SIMBA_OK);
    CHECK(tls);
}

/* the server takes TLS only: without it the login is refused, in the server's words */
TEST(without_tls_the_server_refuses) {
    simba_pg_desc d;
    char err[512];
    int tls;
    base_desc(&d);
    d.sslmode = "disable";
    CHECK_RC(lock_once(&d, "tls-none", 1500, &tls, err, sizeof err), SIMBA_ETIMEDOUT);
    fprintf(stderr, "    (%s)\n", err);
    CHECK(strstr(err, "no encryption") != NULL);
}

TEST(client_certificate_logs_in) {
    simba_pg_desc d;
    char err[512];
    int tls;
    base_desc(&d);
    d.user = "certuser";
    d.password = NULL;
    d.sslmode = "verify-full";
    d.sslrootcert = ca;
    d.tls_name = "simba-tls.test";
    d.sslcert = client_crt;
    d.sslkey = client_key;
    CHECK_RC(lock_once(&d, "tls-client", 10000, &tls, err, sizeof err), SIMBA_OK);
    CHECK(tls);
    /* the same user without its certificate: refused by the server */
    d.sslcert = NULL;
    d.sslkey = NULL;
    CHECK_RC(lock_once(&d, "tls-client-none", 1500, &tls, err, sizeof err), SIMBA_ETIMEDOUT);
    fprintf(stderr, "    (%s)\n", err);
    CHECK(strstr(err, "certificate") != NULL);
}

/* the documented pass-through: the same settings in conninfo */
TEST(conninfo_carries_tls_too) {
    simba_pg_desc d;
    char ci[700], err[512];
    int tls;
    memset(&d, 0, sizeof d);
    snprintf(ci, sizeof ci, "host=simba-tls.test hostaddr=127.0.0.1 port=%d user=postgres password=simba dbname=postgres "
             "sslmode=verify-full sslrootcert=%s", port, ca);
    d.conninfo = ci;
    CHECK_RC(lock_once(&d, "tls-conninfo", 10000, &tls, err, sizeof err), SIMBA_OK);
    CHECK(tls);
    snprintf(ci, sizeof ci, "host=simba-tls.test hostaddr=127.0.0.1 port=%d user=postgres password=simba dbname=postgres "
             "sslmode=verify-full sslrootcert=%s", port, other_ca);
    CHECK_RC(lock_once(&d, "tls-conninfo-wrong", 1500, &tls, err, sizeof err), SIMBA_ETIMEDOUT);
    CHECK(strstr(err, "certificate verify failed") != NULL);
}

TEST(desc_refusals_say_why) {
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_pg_desc d;
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK);
    base_desc(&d);
    d.sslmode = "verify";
    CHECK_RC(simba_pg_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "sslmode \"verify\"") != NULL);
    base_desc(&d);
    d.sslrootcert = "";
    CHECK_RC(simba_pg_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "sslrootcert") != NULL);
    base_desc(&d);
    d.hostaddr = NULL;
    d.tls_name = "simba-tls.test";
    CHECK_RC(simba_pg_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "tls_name needs hostaddr") != NULL);
    base_desc(&d);
    d.tls_name = "a name";
    CHECK_RC(simba_pg_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "tls_name") != NULL);
    simba_loop_free(loop);
}

int main(int argc, char **argv) {
    const char *e = getenv("SIMBA_PG_TLS_PORT"), *dir = getenv("SIMBA_PG_TLS_CERTS");
    if (!e || !*e || !dir || !*dir) {
        fprintf(stderr, "test_pg_tls: run it through tests/test_pg_tls.sh (SIMBA_PG_TLS_PORT, SIMBA_PG_TLS_CERTS)\n");
        fprintf(stderr, "test_pg_tls: 0 passed, 1 failed\n");
        return 1;
    }
    port = atoi(e);
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    snprintf(other_ca, sizeof other_ca, "%s/other-ca.crt", dir);
    snprintf(client_crt, sizeof client_crt, "%s/client.crt", dir);
    snprintf(client_key, sizeof client_key, "%s/client.key", dir);
    CHECK_INIT(argc, argv);
    RUN(desc_refusals_say_why);
    RUN(verify_full_with_the_right_ca_connects);
    RUN(verify_full_with_the_wrong_ca_fails_in_words);
    RUN(verify_full_with_another_name_fails_in_words);
    RUN(verify_ca_needs_no_name);
    RUN(without_tls_the_server_refuses);
    RUN(client_certificate_logs_in);
    RUN(conninfo_carries_tls_too);
    return check_report("test_pg_tls");
}
