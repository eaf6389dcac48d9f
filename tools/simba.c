/*
 * simba -- command-line tool for simba locks: run a command under a lock or as the elected
 * leader, inspect, watch, list and force-release mutexes. One C file on the public API of
 * simba.h, simba_sql.h, simba_redis.h, simba_zk.h, simba_pg.h and simba_mysql.h. `simba --help` lists commands, options
 * and exit statuses.
 *
 * run / elect / watch drive the library (simba_contend / simba_observe) from one poll(2) loop
 * that also reads a self-pipe fed by the signal handlers (SIGCHLD and forwarded signals), so
 * reaping and forwarding never delay a lease renewal; the same poll serves the statistics
 * socket whose path the command gets in SIMBA_STATS_SOCKET (`simba get` asks it for the
 * statistics, `simba yield` asks the holder to hand over).
 * get / ls / release --fence stand on the library's inspection (simba_inspect, simba_list,
 * simba_force_release): no storage layout is known here.
 */
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 700 /* realpath */
#define SIMBA_IMPLEMENTATION
#include "../simba_sql.h"
#include "../simba_redis.h"
#include "../simba_zk.h"
#include "../simba_pg.h"
#include "../simba_mysql.h"

#include <zookeeper/zookeeper.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- exit statuses (documented in usage() and the README) ------------------------------- */
enum {
    EXIT_OK = 0,
    EXIT_NO = 1,        /* get: nobody owns it; release: not released (fence or owner differs) */
    EXIT_USAGE = 64,    /* bad command line, option or URL */
    EXIT_BACKEND = 69,  /* the backend failed or could not be reached */
    EXIT_SOFTWARE = 70, /* library call failed unexpectedly */
    EXIT_OSERR = 71,    /* a system call failed (fork, pipe, poll) */
    EXIT_BUSY = 75,     /* run/elect: not acquired (-n and held, or -w timed out) */
    EXIT_LOST = 76,     /* run/elect: the lease was lost while the command ran; it was signalled */
    EXIT_NOPERM = 77    /* the store refused the login, the role, the database or a privilege */
};

static const char *prog = "simba";

static void errorf(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void usage_options(FILE *f);

static void usage_commands(FILE *f) {
    fprintf(f,
        "usage: simba [-u URL] COMMAND [options] ...\n"
        "       simba --help | --version\n"
        "\n"
        "commands:\n"
        "  run NAME [-n] [-w SEC] [lease options] -- CMD [ARG...]\n"
        "      wait for the lock NAME, run CMD while holding it, release when it exits, exit with\n"
        "      its status. CMD runs in its own process group with SIMBA_MUTEX, SIMBA_FENCE,\n"
        "      SIMBA_VALUE and SIMBA_STATS_SOCKET in its environment. INT TERM HUP QUIT USR1 USR2\n"
        "      sent to simba go to that group; run from a terminal, the group gets the terminal.\n"
        "  run --permits N NAME ... -- CMD    one of at most N holders of NAME (a semaphore)\n"
        "  run --shared NAME ... -- CMD       a reader of NAME: with other readers, never with a\n"
        "      writer (a plain run of NAME is a writer); each holder has its own SIMBA_FENCE\n"
        "  elect NAME [--value STR] [--yield-on SIG] [--once] [lease options] -- CMD [ARG...]\n"
        "      run CMD only while leader; when leadership is lost stop it and wait to lead\n"
        "      again (--once: exit with status 76 instead). If CMD exits by itself, leadership\n"
        "      is released and simba exits with its status. The store keeps STR (default\n"
        "      HOST:PID of simba) with the leadership: get and watch show where the leader is.\n"
        "  yield NAME [--stats SOCKET]\n"
        "      ask the run/elect of this host that holds NAME to hand over: it stops CMD, then\n"
        "      the oldest waiter gets the lock and it waits behind (exit 0); with nobody\n"
        "      waiting it keeps the lock and CMD runs on (exit 1)\n"
        "  get NAME [--json] [--stats SOCKET]\n"
        "      owner, fence, acquired, time left, and every holder of a semaphore or the readers\n"
        "      (exit 1 when nobody owns it); inside a run or elect of NAME (or with --stats),\n"
        "      also the statistics of the simba that holds it\n"
        "  watch NAME [--json] [--refresh SEC]\n"
        "      a line per owner change seen, until INT or TERM (an observer, never contends)\n"
        "  ls [--json]            every mutex the backend has stored, with its owner (a name\n"
        "                       with several holders: the first to free, then +N)\n"
        "  release NAME --fence N force-release the holder of NAME with fence N, if it holds\n"
        "  init [--force]         Redis: declare a new server empty (simba:fresh in every db), so\n"
        "                       that the first lock waits no data-loss quarantine; refused (1)\n"
        "                       when it holds simba keys, unless --force. Not after a restart of\n"
        "                       a server in use: a lease it lost may still be live\n"
        "  checkpoint [--every SEC]\n"
        "      SQLite: copy the WAL into the database file once, or every SEC seconds until INT\n"
        "      or TERM; for applications whose loops open SQLite with checkpoint = -1, so that\n"
        "      their polls never wait for the disk (simba_sql_checkpoint)\n"
        "\n"
        );
}

static void usage(FILE *f) {
    usage_commands(f);
    fprintf(f,
        "backend URL (-u URL, else $SIMBA_URL):\n"
        "  sqlite:PATH                    SQLite file (table simba_mutex)\n"
        "  redis://HOST[:PORT][/DB]       password from $SIMBA_REDIS_PASSWORD (user from\n"
        "                                 $SIMBA_REDIS_USERNAME), never from the URL\n"
        "  zk://HOST:PORT[,HOST:PORT...][/ROOT]   root defaults to /simba\n"
        "  postgres://[USER@]HOST[:PORT][/DB][?table=NAME]   HOST numeric (IPv4, [IPv6]); port\n"
        "                                 5432, table simba_mutex; password from $PGPASSWORD\n"
        "                                 (or ~/.pgpass), never from the URL; postgresql:// too\n"
        "      TLS: &sslmode=verify-full&sslrootcert=CA.crt (also sslcert=, sslkey=); a HOST\n"
        "      name with &hostaddr=IP is what verify-full checks (never resolved)\n"
        "  mysql://[USER[:PASSWORD]@]HOST[:PORT]/DB[?table=NAME]   MySQL/MariaDB, HOST numeric;\n"
        "                                 port 3306, table simba_mutex; password from $MYSQL_PWD\n"
        "                                 unless in the URL (where ps shows it)\n"
        "      unix socket: mysql://USER@localhost/DB?socket=/run/mysqld/mysqld.sock\n"
        "      TLS: &ssl-mode=verify_identity&ssl-ca=CA.crt (also ssl-cert=, ssl-key=;\n"
        "      ssl-mode disabled, required, verify_ca, verify_identity); &connections=N: N request\n"
        "      connections (1..64, default 1; for thousands of names)\n"
        "\n");
    usage_options(f);
    fprintf(f, /* in parts: C99 promises string literals of 4095 bytes only */
        "ZooKeeper: the lease is the session; simba asks for a session timeout of ttl+transition.\n"
        "get, ls and release --fence ask the library (simba_inspect, simba_list,\n"
        "simba_force_release); get on SQLite opens the file read-only. A forced release lets the\n"
        "stuck owner's next renewal fail; the head waiter is woken as by a release.\n"
        "Statistics: run and elect answer on a private socket (mode 0600 in a directory 0700\n"
        "under $XDG_RUNTIME_DIR, $TMPDIR or /tmp, removed at exit) with the counters of their\n"
        "service: acquisitions, releases by reason, step-downs, attempts, renewals, failed\n"
        "renewals, errors, current and total hold, waits, last error. simba yield asks on it.\n"
        "Values: get and watch print them quoted, non-printable bytes as \\xHH; in JSON,\n"
        "\"value\" is a string (null when nobody owns it), or null with \"value_base64\" when\n"
        "the bytes are not UTF-8. SIMBA_VALUE_MAX is %d bytes.\n"
        "\n", SIMBA_VALUE_MAX);
    fprintf(f,
        "exit status:\n"
        "  run/elect: CMD's status; 128+N if CMD died of signal N; 126/127 CMD not executable /\n"
        "             not found; 75 not acquired (-n held, -w timed out); 76 lease lost while CMD\n"
        "             ran (CMD was signalled); 128+N if simba got signal N before CMD started\n"
        "  get: 0 owned, 1 nobody owns it     release: 0 released, 1 fence or owner differs\n"
        "  yield: 0 passed on, 1 kept (nobody waits) or no local holder, 69 no answer or the\n"
        "         store failed; run: 76 when CMD was stopped to yield\n"
        "  get --stats: 64 the socket serves another mutex or backend, 69 it does not answer\n"
        "  run/elect: 69 no answer from the backend for --connect-timeout seconds\n"
        "  all: 64 bad usage or URL, 69 backend failed or unreachable, 70 internal error,\n"
        "       71 system call failed, 77 the store refused the login, role, database or a\n"
        "       privilege (at once, also run/elect)\n");
}

/* ---- small utilities ------------------------------------------------------------------ */

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void iso_time(int64_t ms, char *buf, size_t cap) {
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    char tmp[32];
    gmtime_r(&s, &tm);
    strftime(tmp, sizeof tmp, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%03dZ", tmp, (int)(ms % 1000));
}

/* Seconds (decimal allowed) -> ms; 0 on success. */
static int parse_sec(const char *opt, const char *s, int64_t *out) {
    char *end;
    double v;
    if (!s || !*s) { errorf("%s: missing value (seconds)", opt); return -1; }
    errno = 0;
    v = strtod(s, &end);
    if (errno || *end || v != v || v < 0 || v > 1e9) {
        errorf("%s: '%s' is not a number of seconds (0..1e9)", opt, s);
        return -1;
    }
    *out = (int64_t)(v * 1000.0 + 0.5);
    return 0;
}

static int parse_u64(const char *opt, const char *s, uint64_t *out) {
    char *end;
    unsigned long long v;
    if (!s || !*s || !isdigit((unsigned char)s[0])) { errorf("%s: '%s' is not a non-negative integer", opt, s ? s : ""); return -1; }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end) { errorf("%s: '%s' is not a non-negative integer", opt, s); return -1; }
    *out = (uint64_t)v;
    return 0;
}

static const struct { const char *name; int sig; } sigtab[] = {
    {"TERM", SIGTERM}, {"INT", SIGINT}, {"HUP", SIGHUP}, {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"ALRM", SIGALRM}, {NULL, 0}};

static int parse_signal(const char *opt, const char *s, int *out) {
    int i;
    if (!s || !*s) { errorf("%s: missing value", opt); return -1; }
    if (isdigit((unsigned char)s[0])) {
        uint64_t v;
        if (parse_u64(opt, s, &v) || v < 1 || v > 64) { errorf("%s: '%s' is not a signal number", opt, s); return -1; }
        *out = (int)v;
        return 0;
    }
    if (strncmp(s, "SIG", 3) == 0) s += 3;
    for (i = 0; sigtab[i].name; i++) {
        if (strcmp(s, sigtab[i].name) == 0) { *out = sigtab[i].sig; return 0; }
    }
    errorf("%s: unknown signal '%s' (TERM INT HUP QUIT KILL USR1 USR2 ALRM or a number)", opt, s);
    return -1;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* ---- leadership values: any bytes, shown safely ------------------------------------------ */

/* Length of the valid UTF-8 character at s (n bytes left) with its code point in *cp, or 0
   for a byte that does not start one (overlong forms, surrogates, cut sequences). */
static size_t utf8_char(const unsigned char *s, size_t n, uint32_t *cp) {
    size_t len, i;
    uint32_t c;
    if (s[0] < 0xC2 || s[0] > 0xF4) return 0;
    len = s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : 4;
    if (n < len) return 0;
    c = s[0] & (0x7Fu >> len);
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3Fu);
    }
    if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10FFFF)) || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

/* The value in double quotes for a terminal or a log: printable ASCII and printable UTF-8 as
   they are, \" \\ \n \r \t, every other byte \xHH, so no value can move the cursor or forge
   a line. */
static void text_value(FILE *f, const unsigned char *v, size_t n) {
    size_t i = 0;
    fputc('"', f);
    while (i < n) {
        unsigned char c = v[i];
        uint32_t cp;
        size_t len;
        if (c >= 0x20 && c < 0x7F) {
            if (c == '"' || c == '\\') fputc('\\', f);
            fputc(c, f);
            i++;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            fprintf(f, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
            i++;
        } else if ((len = utf8_char(v + i, n - i, &cp)) != 0 && cp >= 0xA0 && cp != 0x2028 && cp != 0x2029) {
            fwrite(v + i, 1, len, f); /* C1 controls and line separators stay escaped */
            i += len;
        } else {
            fprintf(f, "\\x%02x", c);
            i++;
        }
    }
    fputc('"', f);
}

/* JSON members for a value: "value" is a string when the bytes are UTF-8 (controls escaped),
   null when nobody owns the mutex; bytes that are not UTF-8 come as "value":null plus
   "value_base64", exactly. */
static void json_value(FILE *f, const unsigned char *v, size_t n, int owned) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i, len;
    uint32_t cp;
    if (!owned) { fputs("\"value\":null", f); return; }
    for (i = 0; i < n; i += len) {
        len = v[i] < 0x80 ? 1 : utf8_char(v + i, n - i, &cp);
        if (len == 0) break;
    }
    if (i < n) { /* not UTF-8 */
        fputs("\"value\":null,\"value_base64\":\"", f);
        for (i = 0; i < n; i += 3) {
            uint32_t w = (uint32_t)v[i] << 16 | (i + 1 < n ? (uint32_t)v[i + 1] << 8 : 0) | (i + 2 < n ? v[i + 2] : 0);
            fputc(b64[w >> 18 & 63], f);
            fputc(b64[w >> 12 & 63], f);
            fputc(i + 1 < n ? b64[w >> 6 & 63] : '=', f);
            fputc(i + 2 < n ? b64[w & 63] : '=', f);
        }
        fputc('"', f);
        return;
    }
    fputs("\"value\":\"", f);
    for (i = 0; i < n; i += len) {
        unsigned char c = v[i];
        len = 1;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n' || c == '\r' || c == '\t') fprintf(f, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
        else if (c < 0x20 || c == 0x7F) fprintf(f, "\\u%04x", c);
        else if (c < 0x80) fputc(c, f);
        else {
            len = utf8_char(v + i, n - i, &cp);
            if (cp < 0xA0 || cp == 0x2028 || cp == 0x2029) fprintf(f, "\\u%04x", (unsigned)cp);
            else fwrite(v + i, 1, len, f);
        }
    }
    fputc('"', f);
}

/* ---- backend URL ------------------------------------------------------------------------ */

enum { BE_SQLITE = 1, BE_REDIS, BE_ZK, BE_PG, BE_MYSQL };

typedef struct url_t {
    int kind;
    char path[4096];  /* sqlite */
    char host[256];   /* redis: numeric after resolve */
    int port;
    int db;
    char hosts[1024]; /* zk */
    char root[300];
    char user[64], dbname[66], table[64]; /* postgres, mysql (host and port above) */
    char password[160];                   /* mysql: from the URL, else $MYSQL_PWD */
    char socket[108];                     /* mysql: the server's unix socket (HOST localhost) */
    /* TLS URL parameters: postgres's (tls_name = HOST when HOST is a name, hostaddr=IP given);
       mysql's ssl-mode, ssl-ca, ssl-cert and ssl-key in sslmode, sslrootcert, sslcert, sslkey */
    char sslmode[16], sslrootcert[1024], sslcert[1024], sslkey[1024], tls_name[256];
    char connections[4]; /* mysql: ?connections=N, its request connections */
} url_t;

/* postgres URL parameters, KEY=VALUE joined by '&' (no %-decoding): table, hostaddr and the
   TLS ones, which go to libpq as they are. */
static int parse_pg_params(const char *u, const char *p, url_t *out, char *hostaddr, size_t hcap) {
    while (*p) {
        size_t n = strcspn(p, "&"), k = strcspn(p, "=");
        char *dst = NULL;
        size_t cap = 0;
        unsigned char addr[16];
        if (k >= n) { errorf("URL '%s': postgres: parameter '%.*s' is not KEY=VALUE", u, (int)n, p); return -1; }
        if (k == 5 && strncmp(p, "table", 5) == 0) dst = out->table, cap = sizeof out->table;
        else if (k == 8 && strncmp(p, "hostaddr", 8) == 0) dst = hostaddr, cap = hcap;
        else if (k == 7 && strncmp(p, "sslmode", 7) == 0) dst = out->sslmode, cap = sizeof out->sslmode;
        else if (k == 11 && strncmp(p, "sslrootcert", 11) == 0) dst = out->sslrootcert, cap = sizeof out->sslrootcert;
        else if (k == 7 && strncmp(p, "sslcert", 7) == 0) dst = out->sslcert, cap = sizeof out->sslcert;
        else if (k == 6 && strncmp(p, "sslkey", 6) == 0) dst = out->sslkey, cap = sizeof out->sslkey;
        if (!dst) {
            errorf("URL '%s': postgres: unknown parameter '%.*s' (table, hostaddr, sslmode, sslrootcert, sslcert, sslkey)", u,
                   (int)k, p);
            return -1;
        }
        if (n - k - 1 == 0 || n - k - 1 >= cap) {
            errorf("URL '%s': postgres: %.*s must be 1..%d bytes", u, (int)k, p, (int)cap - 1);
            return -1;
        }
        memcpy(dst, p + k + 1, n - k - 1);
        dst[n - k - 1] = 0;
        if (dst == hostaddr && inet_pton(AF_INET, hostaddr, addr) != 1 && inet_pton(AF_INET6, hostaddr, addr) != 1) {
            errorf("URL '%s': postgres: hostaddr '%s' must be a numeric address", u, hostaddr);
            return -1;
        }
        p += n;
        if (*p == '&') p++;
    }
    return 0;
}

static int parse_port(const char *what, const char *s, size_t n, int *out) {
    int v = 0;
    size_t i;
    if (n == 0 || n > 5) { errorf("URL: %s: port '%.*s' is not 1..65535", what, (int)n, s); return -1; }
    for (i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i])) { errorf("URL: %s: port '%.*s' is not a number", what, (int)n, s); return -1; }
        v = v * 10 + (s[i] - '0');
    }
    if (v < 1 || v > 65535) { errorf("URL: %s: port %d is not 1..65535", what, v); return -1; }
    *out = v;
    return 0;
}

static int parse_sqlite_url(const char *u, const char *p, url_t *out) {
    if (strncmp(p, "//", 2) == 0) p += 2; /* sqlite:///abs/path */
    if (!*p) { errorf("URL '%s': sqlite: the PATH is empty", u); return -1; }
    if (strlen(p) >= sizeof out->path) { errorf("URL: sqlite: PATH is too long"); return -1; }
    out->kind = BE_SQLITE;
    strcpy(out->path, p);
    return 0;
}

static int parse_redis_url(const char *u, const char *p, url_t *out) {
    const char *hend, *rest;
    size_t hn;
    out->kind = BE_REDIS;
    out->port = 6379;
    if (strchr(p, '@')) {
        errorf("URL '%s': credentials in the URL are refused (they would show in ps): set SIMBA_REDIS_PASSWORD (and SIMBA_REDIS_USERNAME)", u);
        return -1;
    }
    if (*p == '[') { /* [v6] */
        hend = strchr(p, ']');
        if (!hend) { errorf("URL '%s': redis: unterminated '[' in the host", u); return -1; }
        hn = (size_t)(hend - p - 1);
        if (hn == 0 || hn >= sizeof out->host) { errorf("URL '%s': redis: bad host", u); return -1; }
        memcpy(out->host, p + 1, hn);
        rest = hend + 1;
    } else {
        hn = strcspn(p, ":/?#");
        if (hn == 0) { errorf("URL '%s': redis: the HOST is empty", u); return -1; }
        if (hn >= sizeof out->host) { errorf("URL '%s': redis: the HOST is too long", u); return -1; }
        memcpy(out->host, p, hn);
        rest = p + hn;
    }
    if (*rest == ':') {
        size_t n = strcspn(rest + 1, "/?#");
        if (parse_port("redis", rest + 1, n, &out->port)) return -1;
        rest += 1 + n;
    }
    if (*rest == '/') {
        uint64_t db;
        rest++;
        if (*rest) {
            size_t n = strcspn(rest, "?#");
            char tmp[16];
            if (n == 0 || n >= sizeof tmp) { errorf("URL '%s': redis: DB '%s' is not a number", u, rest); return -1; }
            memcpy(tmp, rest, n);
            tmp[n] = 0;
            if (parse_u64("URL: redis: DB", tmp, &db) || db > 1000000) return -1;
            out->db = (int)db;
            rest += n;
        }
    }
    if (*rest) { errorf("URL '%s': redis: unexpected '%s' after HOST:PORT/DB", u, rest); return -1; }
    return 0;
}

/* A HOST name needs hostaddr=IP: the backend never resolves, the name is for verify-full. */
static int pg_host_addr(const char *u, url_t *out, const char *hostaddr) {
    unsigned char addr[16];
    if (inet_pton(AF_INET, out->host, addr) != 1 && inet_pton(AF_INET6, out->host, addr) != 1) {
        if (!hostaddr[0]) {
            errorf("URL '%s': postgres: HOST '%s' is a name and the backend never resolves names: give a numeric "
                   "HOST, or add hostaddr=IP (the name is then what sslmode=verify-full checks)", u, out->host);
            return -1;
        }
        snprintf(out->tls_name, sizeof out->tls_name, "%s", out->host);
        snprintf(out->host, sizeof out->host, "%s", hostaddr);
    } else if (hostaddr[0]) {
        errorf("URL '%s': postgres: hostaddr= goes with a HOST name, not with the address '%s'", u, out->host);
        return -1;
    }
    return 0;
}

static int parse_pg_url(const char *u, const char *p, url_t *out) {
    const char *at, *end, *hend, *q;
    char hostaddr[64] = "";
    size_t hn;
    out->kind = BE_PG;
    out->port = 5432;
    snprintf(out->table, sizeof out->table, "simba_mutex");
    end = p + strcspn(p, "/?");
    at = memchr(p, '@', (size_t)(end - p));
    if (at) {
        if (memchr(p, ':', (size_t)(at - p))) {
            errorf("URL '%s': credentials in the URL are refused (they would show in ps): set PGPASSWORD or use ~/.pgpass", u);
            return -1;
        }
        if (at == p || (size_t)(at - p) >= sizeof out->user) { errorf("URL '%s': postgres: bad USER", u); return -1; }
        memcpy(out->user, p, (size_t)(at - p));
        p = at + 1;
    }
    if (*p == '[') {
        hend = memchr(p, ']', (size_t)(end - p));
        if (!hend) { errorf("URL '%s': postgres: unterminated '[' in the host", u); return -1; }
        hn = (size_t)(hend - p - 1);
        if (hn == 0 || hn >= sizeof out->host) { errorf("URL '%s': postgres: bad host", u); return -1; }
        memcpy(out->host, p + 1, hn);
        q = hend + 1;
    } else {
        hend = memchr(p, ':', (size_t)(end - p));
        q = hend ? hend : end;
        hn = (size_t)(q - p);
        if (hn == 0) { errorf("URL '%s': postgres: the HOST is empty", u); return -1; }
        if (hn >= sizeof out->host) { errorf("URL '%s': postgres: the HOST is too long", u); return -1; }
        memcpy(out->host, p, hn);
    }
    out->host[hn] = 0;
    if (*q == ':') {
        if (parse_port("postgres", q + 1, (size_t)(end - q - 1), &out->port)) return -1;
    } else if (q != end) { errorf("URL '%s': postgres: unexpected '%.*s' after the HOST", u, (int)(end - q), q); return -1; }
    p = end;
    if (*p == '/') {
        size_t n = strcspn(p + 1, "?");
        if (n >= sizeof out->dbname) { errorf("URL '%s': postgres: DB too long", u); return -1; }
        memcpy(out->dbname, p + 1, n);
        out->dbname[n] = 0;
        p += 1 + n;
    }
    if (*p == '?' && parse_pg_params(u, p + 1, out, hostaddr, sizeof hostaddr) != 0) return -1;
    return pg_host_addr(u, out, hostaddr);
}

/* mysql URL parameters, KEY=VALUE joined by '&' (no %-decoding): table and the TLS ones. */
static int parse_mysql_params(const char *u, const char *p, url_t *out) {
    static const char *const modes[] = {"disabled", "required", "verify_ca", "verify_identity"};
    int i;
    while (*p) {
        size_t n = strcspn(p, "&"), k = strcspn(p, "=");
        char *dst = NULL;
        size_t cap = 0;
        if (k >= n) { errorf("URL '%s': mysql: parameter '%.*s' is not KEY=VALUE", u, (int)n, p); return -1; }
        if (k == 5 && strncmp(p, "table", 5) == 0) dst = out->table, cap = 49;
        else if (k == 8 && strncmp(p, "ssl-mode", 8) == 0) dst = out->sslmode, cap = sizeof out->sslmode;
        else if (k == 6 && strncmp(p, "ssl-ca", 6) == 0) dst = out->sslrootcert, cap = sizeof out->sslrootcert;
        else if (k == 8 && strncmp(p, "ssl-cert", 8) == 0) dst = out->sslcert, cap = sizeof out->sslcert;
        else if (k == 7 && strncmp(p, "ssl-key", 7) == 0) dst = out->sslkey, cap = sizeof out->sslkey;
        else if (k == 6 && strncmp(p, "socket", 6) == 0) dst = out->socket, cap = sizeof out->socket;
        else if (k == 11 && strncmp(p, "connections", 11) == 0) dst = out->connections, cap = sizeof out->connections;
        else {
            errorf("URL '%s': mysql: unknown parameter '%.*s' (table, socket, connections, ssl-mode, ssl-ca, ssl-cert, ssl-key)", u,
                   (int)k, p);
            return -1;
        }
        if (n - k - 1 == 0 || n - k - 1 >= cap) { errorf("URL '%s': mysql: %.*s must be 1..%d bytes", u, (int)k, p, (int)cap - 1); return -1; }
        memcpy(dst, p + k + 1, n - k - 1);
        dst[n - k - 1] = 0;
        p += n + (p[n] == '&');
    }
    for (i = 0; out->sslmode[0] && i < 4 && strcmp(out->sslmode, modes[i]) != 0; i++) {}
    if (i == 4) { errorf("URL '%s': mysql: ssl-mode must be disabled, required, verify_ca or verify_identity", u); return -1; }
    if (out->socket[0] && out->socket[0] != '/') { errorf("URL '%s': mysql: socket must be an absolute path", u); return -1; }
    if (out->connections[0] && (strspn(out->connections, "0123456789") != strlen(out->connections) ||
                                atoi(out->connections) < 1 || atoi(out->connections) > SIMBA_MYSQL_CONNECTIONS_MAX)) {
        errorf("URL '%s': mysql: connections must be 1..%d", u, SIMBA_MYSQL_CONNECTIONS_MAX);
        return -1;
    }
    return 0;
}

/* mysql://[USER[:PASSWORD]@]HOST[:PORT]/DB[?table=NAME], HOST numeric (the backend never
   resolves names), or localhost with ?socket=PATH. Without :PASSWORD, $MYSQL_PWD (a password
   in the URL shows in ps). */
static int parse_mysql_url(const char *u, const char *p, url_t *out) {
    const char *end = p + strcspn(p, "/?"), *at = memchr(p, '@', (size_t)(end - p)), *q, *hend;
    size_t n;
    unsigned char addr[16];
    out->kind = BE_MYSQL;
    out->port = 3306;
    snprintf(out->table, sizeof out->table, "simba_mutex");
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        size_t un = (size_t)((colon ? colon : at) - p);
        if (un == 0 || un >= sizeof out->user) { errorf("URL '%s': mysql: USER must be 1..%d bytes", u, (int)sizeof out->user - 1); return -1; }
        memcpy(out->user, p, un);
        n = colon ? (size_t)(at - colon - 1) : 0;
        if (n >= sizeof out->password) { errorf("URL '%s': mysql: PASSWORD too long", u); return -1; }
        if (colon) memcpy(out->password, colon + 1, n);
        p = at + 1;
    }
    if (!out->password[0] && getenv("MYSQL_PWD")) snprintf(out->password, sizeof out->password, "%s", getenv("MYSQL_PWD"));
    if (*p == '[') {
        hend = memchr(p, ']', (size_t)(end - p));
        if (!hend) { errorf("URL '%s': mysql: unterminated '[' in the host", u); return -1; }
        n = (size_t)(hend - p - 1);
        q = hend + 1;
        p++;
    } else {
        hend = memchr(p, ':', (size_t)(end - p));
        q = hend ? hend : end;
        n = (size_t)(q - p);
    }
    if (n == 0 || n >= 64) { errorf("URL '%s': mysql: the HOST is empty or too long", u); return -1; }
    memcpy(out->host, p, n);
    if (*q == ':') {
        if (parse_port("mysql", q + 1, (size_t)(end - q - 1), &out->port)) return -1;
    } else if (q != end) { errorf("URL '%s': mysql: unexpected '%.*s' after the HOST", u, (int)(end - q), q); return -1; }
    n = *end == '/' ? strcspn(end + 1, "?") : 0;
    if (n == 0 || n > 64) { errorf("URL '%s': mysql: /DB (the database of the tables) is required, 1..64 bytes", u); return -1; }
    memcpy(out->dbname, end + 1, n);
    p = end + 1 + n;
    if (*p == '?' && parse_mysql_params(u, p + 1, out) != 0) return -1;
    if (out->socket[0] && strcmp(out->host, "localhost") != 0) {
        errorf("URL '%s': mysql: with socket=, the HOST is localhost", u);
        return -1;
    }
    if (!out->socket[0] && inet_pton(AF_INET, out->host, addr) != 1 && inet_pton(AF_INET6, out->host, addr) != 1) {
        errorf("URL '%s': mysql: HOST '%s' is a name and the backend never resolves names: give its numeric address "
               "(or localhost with ?socket=PATH)", u, out->host);
        return -1;
    }
    return 0;
}

/* ROOT: components non-empty, not . or ..; /simba when none is given. */
static int zk_root(const char *u, const char *slash, url_t *out) {
    if (slash && slash[1]) {
        const char *r = slash;
        if (strlen(slash) >= sizeof out->root) { errorf("URL '%s': zk: ROOT too long", u); return -1; }
        if (slash[strlen(slash) - 1] == '/') { errorf("URL '%s': zk: ROOT must not end with '/'", u); return -1; }
        while (*r) { /* components: non-empty, not . or .. */
            size_t n = strcspn(r + 1, "/");
            if (n == 0 || (n == 1 && r[1] == '.') || (n == 2 && r[1] == '.' && r[2] == '.')) {
                errorf("URL '%s': zk: ROOT '%s' has an empty, '.' or '..' component", u, slash);
                return -1;
            }
            r += 1 + n;
        }
        strcpy(out->root, slash);
    } else {
        strcpy(out->root, "/simba");
    }
    return 0;
}

static int parse_zk_url(const char *u, const char *p, url_t *out) {
    const char *slash = strchr(p, '/'), *q;
    size_t hn = slash ? (size_t)(slash - p) : strlen(p);
    out->kind = BE_ZK;
    if (hn == 0) { errorf("URL '%s': zk: no HOST:PORT", u); return -1; }
    if (hn >= sizeof out->hosts) { errorf("URL '%s': zk: host list too long", u); return -1; }
    memcpy(out->hosts, p, hn);
    /* every entry HOST:PORT */
    for (q = out->hosts; *q;) {
        size_t n = strcspn(q, ","), c;
        const char *colon;
        if (n == 0) { errorf("URL '%s': zk: empty entry in the host list", u); return -1; }
        colon = NULL;
        for (c = 0; c < n; c++) if (q[c] == ':') colon = q + c;
        if (!colon || colon == q) { errorf("URL '%s': zk: '%.*s' is not HOST:PORT", u, (int)n, q); return -1; }
        if (parse_port("zk", colon + 1, (size_t)(q + n - colon - 1), &out->port)) return -1;
        q += n;
        if (*q == ',') q++;
    }
    return zk_root(u, slash, out);
}

/* One parser per URL scheme: p is the URL after the prefix. A scheme is a row here. */
typedef struct scheme_t {
    const char *prefix;
    int (*parse)(const char *u, const char *p, url_t *out);
} scheme_t;
static const scheme_t schemes[] = {
    {"sqlite:", parse_sqlite_url},  {"redis://", parse_redis_url},      {"postgres://", parse_pg_url},
    {"postgresql://", parse_pg_url}, {"zk://", parse_zk_url},          {"mysql://", parse_mysql_url},
};
#define URL_FORMS "sqlite:PATH, redis://HOST:PORT[/DB], zk://HOST:PORT[/ROOT], postgres://HOST[:PORT][/DB], mysql://HOST[:PORT]/DB"

static int parse_url(const char *u, url_t *out) {
    size_t i, n;
    memset(out, 0, sizeof *out);
    if (!u || !*u) {
        errorf("no backend: give -u URL or set SIMBA_URL (" URL_FORMS ")");
        return -1;
    }
    for (i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (strncmp(u, schemes[i].prefix, strlen(schemes[i].prefix)) == 0) return schemes[i].parse(u, u + strlen(schemes[i].prefix), out);
    n = strcspn(u, ":");
    errorf("URL '%s': unknown scheme '%.*s' (" URL_FORMS ")", u, (int)n, u);
    return -1;
}

/* The library takes numeric hosts only (a name lookup could block its loop): resolve here,
   once, before any loop runs. */
static int resolve_redis_host(url_t *u) {
    struct in6_addr a6;
    struct in_addr a4;
    struct addrinfo hints, *res = NULL;
    int rc;
    if (strcmp(u->host, "localhost") == 0 || inet_pton(AF_INET, u->host, &a4) == 1 || inet_pton(AF_INET6, u->host, &a6) == 1) return 0;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(u->host, NULL, &hints, &res);
    if (rc != 0 || !res) {
        errorf("URL: redis: cannot resolve host '%s': %s", u->host, gai_strerror(rc));
        return -1;
    }
    if (res->ai_family == AF_INET) inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr, u->host, sizeof u->host);
    else inet_ntop(AF_INET6, &((struct sockaddr_in6 *)(void *)res->ai_addr)->sin6_addr, u->host, sizeof u->host);
    freeaddrinfo(res);
    return 0;
}

/* The backend in one string, so that `get --stats` can tell whether a stats socket speaks of
   the same store as its URL, and error lines name it: sqlite by real path, redis by resolved
   host, postgres with its user, zk as given. */
static void backend_id(const url_t *u, char *out, size_t cap) {
    if (u->kind == BE_SQLITE) {
        char *rp = realpath(u->path, NULL);
        snprintf(out, cap, "sqlite:%s", rp ? rp : u->path);
        free(rp);
    } else if (u->kind == BE_REDIS) {
        snprintf(out, cap, strchr(u->host, ':') ? "redis://[%s]:%d/%d" : "redis://%s:%d/%d", u->host, u->port, u->db);
    } else if (u->kind == BE_PG) {
        snprintf(out, cap, strchr(u->host, ':') ? "postgres://%s%s[%s]:%d/%s?table=%s" : "postgres://%s%s%s:%d/%s?table=%s", u->user,
                 u->user[0] ? "@" : "", u->host, u->port, u->dbname, u->table); /* the user, never a password */
    } else if (u->kind == BE_MYSQL && u->socket[0]) {
        snprintf(out, cap, "mysql://%s%slocalhost/%s?table=%s&socket=%s", u->user, u->user[0] ? "@" : "", u->dbname, u->table,
                 u->socket);
    } else if (u->kind == BE_MYSQL) {
        snprintf(out, cap, strchr(u->host, ':') ? "mysql://%s%s[%s]:%d/%s?table=%s" : "mysql://%s%s%s:%d/%s?table=%s", u->user,
                 u->user[0] ? "@" : "", u->host, u->port, u->dbname, u->table);
    } else {
        snprintf(out, cap, "zk://%s%s", u->hosts, u->root);
    }
}

/* ---- command-line options ------------------------------------------------------------------ */

typedef struct opts_t {
    const char *url;
    const char *name;
    char **cmd; /* after "--" */
    int nonblock, once, json, verbose, have_fence, have_wait;
    int64_t wait_ms, ttl_ms, transition_ms, grace_ms, refresh_ms, every_ms;
    int64_t connect_ms; /* run/elect --connect-timeout: longest time without a reachable backend, 0 = none */
    int have_grace, have_connect;
    int sig;
    uint64_t fence;
    const char *id;
    const char *stats_sock; /* get --stats SOCKET */
    const char *stats_file; /* run/elect --stats-file FILE */
    int no_stats_socket;    /* run/elect --no-stats-socket */
    int force;              /* init --force */
    int permits, shared;    /* run/elect --permits N, --shared */
    const char *value;      /* run/elect --value STR (default HOST:PID) */
    int have_value;
    int yield_sig;          /* elect --yield-on SIGNAL, 0 = none */
} opts_t;

/* ---- the options: one table parses them and prints them in --help --------------------------- */

static int opt_positive(const char *a, int64_t v) {
    if (v > 0) return 0;
    errorf("%s: must be above 0", a);
    return -1;
}
static int opt_wait(opts_t *o, const char *a, const char *v) { o->have_wait = 1; return parse_sec(a, v, &o->wait_ms); }
static int opt_connect(opts_t *o, const char *a, const char *v) { o->have_connect = 1; return parse_sec(a, v, &o->connect_ms); }
static int opt_ttl(opts_t *o, const char *a, const char *v) { return parse_sec(a, v, &o->ttl_ms) || opt_positive(a, o->ttl_ms); }
static int opt_transition(opts_t *o, const char *a, const char *v) { return parse_sec(a, v, &o->transition_ms); }
static int opt_signal(opts_t *o, const char *a, const char *v) { return parse_signal(a, v, &o->sig); }
static int opt_grace(opts_t *o, const char *a, const char *v) { o->have_grace = 1; return parse_sec(a, v, &o->grace_ms); }
static int opt_refresh(opts_t *o, const char *a, const char *v) { return parse_sec(a, v, &o->refresh_ms) || opt_positive(a, o->refresh_ms); }
static int opt_every(opts_t *o, const char *a, const char *v) { return parse_sec(a, v, &o->every_ms) || opt_positive(a, o->every_ms); }
static int opt_fence(opts_t *o, const char *a, const char *v) { o->have_fence = 1; (void)a; return parse_u64("--fence", v, &o->fence); }
static int opt_url(opts_t *o, const char *a, const char *v) { (void)a; o->url = v; return 0; }
static int opt_id(opts_t *o, const char *a, const char *v) {
    (void)a;
    if (simba_id_check(v) != SIMBA_OK) { errorf("--id: '%s' is not a contender id (1..%d printable non-space bytes)", v, SIMBA_ID_MAX); return -1; }
    o->id = v;
    return 0;
}
static int opt_path(const char *a, const char *v, const char *what, const char **out) {
    if (!*v) { errorf("%s: the %s path is empty", a, what); return -1; }
    *out = v;
    return 0;
}
static int opt_stats(opts_t *o, const char *a, const char *v) { return opt_path(a, v, "SOCKET", &o->stats_sock); }
static int opt_stats_file(opts_t *o, const char *a, const char *v) { return opt_path(a, v, "FILE", &o->stats_file); }
static int opt_permits(opts_t *o, const char *a, const char *v) {
    uint64_t n;
    if (parse_u64(a, v, &n)) return -1;
    if (n < 1 || n > SIMBA_PERMITS_MAX) { errorf("--permits: %s is out of range (1..%d)", v, SIMBA_PERMITS_MAX); return -1; }
    o->permits = (int)n;
    return 0;
}
static int opt_value(opts_t *o, const char *a, const char *v) {
    (void)a;
    if (strlen(v) > SIMBA_VALUE_MAX) {
        errorf("--value: %zu bytes is over the limit of %d (SIMBA_VALUE_MAX)", strlen(v), SIMBA_VALUE_MAX);
        return -1;
    }
    o->value = v;
    o->have_value = 1;
    return 0;
}
static int opt_yield_on(opts_t *o, const char *a, const char *v) {
    if (parse_signal(a, v, &o->yield_sig)) return -1;
    if (o->yield_sig == SIGHUP || o->yield_sig == SIGUSR1 || o->yield_sig == SIGUSR2) return 0;
    errorf("--yield-on: '%s': HUP, USR1 or USR2 (INT, TERM and QUIT stop simba)", v);
    return -1;
}

/* A row: its names, ARG (NULL: a flag, set at flag), how to take the value, and its --help
   text (continuation lines after '\n'). -h and --version are read by main. */
typedef struct option_t {
    const char *shortname, *name, *arg;
    size_t flag; /* offsetof(opts_t, ...) of the int a flag sets */
    int (*set)(opts_t *o, const char *a, const char *v);
    const char *help;
} option_t;
#define FLAG(f) offsetof(opts_t, f), NULL
static const option_t options[] = {
    {"-h", "--help", NULL, 0, NULL, "this text"},
    {NULL, "--version", NULL, 0, NULL, "print \"simba VERSION\" and exit"},
    {"-u", "--url", "URL", 0, opt_url, "the backend (else $SIMBA_URL); before or after the command"},
    {"-n", "--nonblock", NULL, FLAG(nonblock), "run/elect: fail at once (status 75) if someone holds the lock\n"
                                               "(waits up to 10 s for the backend's first answer, else 69)"},
    {"-w", "--wait", "SEC", 0, opt_wait, "run/elect: give up after SEC seconds of waiting (status 75);\n"
                                         "-w 0 is -n; bounds the whole wait, a silent backend included"},
    {NULL, "--connect-timeout", "SEC", 0, opt_connect, "run/elect: give up (status 69, with the backend's reason)\n"
                                                       "after SEC seconds in which no request was answered while\n"
                                                       "simba does not hold the lock (default 30; 0 = no limit)"},
    {NULL, "--ttl", "SEC", 0, opt_ttl, "lease (default 10); the owner renews before it ends"},
    {NULL, "--transition", "SEC", 0, opt_transition, "window after the lease in which nobody else may win (default 6)"},
    {"-s", "--signal", "SIG", 0, opt_signal, "signal for CMD's group when the lease is lost (default TERM)"},
    {"-g", "--grace", "SEC", 0, opt_grace, "then SIGKILL after SEC (default transition/2); must be shorter\n"
                                           "than the transition window (ZooKeeper: (ttl+transition)/3), so\n"
                                           "that CMD is gone before another contender can win"},
    {NULL, "--id", "ID", 0, opt_id, "contender id (default counter:pid@host)"},
    {NULL, "--permits", "N", 0, opt_permits, "run/elect: at most N holders of NAME (2..1024; 1 = a mutex);\n"
                                             "every holder of NAME must give the same N"},
    {NULL, "--shared", NULL, FLAG(shared), "run/elect: hold NAME as a reader (not with --permits N > 1)"},
    {NULL, "--once", NULL, FLAG(once), "elect: exit when leadership is lost (or yielded)"},
    {NULL, "--value", "STR", 0, opt_value, "run/elect: the value stored with the ownership, in\n"
                                           "SIMBA_VALUE for CMD (default HOST:PID; at most SIMBA_VALUE_MAX bytes)"},
    {NULL, "--yield-on", "SIG", 0, opt_yield_on, "elect: yield on signal SIG (HUP, USR1 or USR2; not forwarded)"},
    {NULL, "--json", NULL, FLAG(json), "get/watch/ls: JSON output (watch: one object per line)"},
    {NULL, "--refresh", "SEC", 0, opt_refresh, "watch: longest time between reads (default 1)"},
    {NULL, "--every", "SEC", 0, opt_every, "checkpoint: repeat every SEC seconds until INT or TERM"},
    {NULL, "--fence", "N", 0, opt_fence, "release: the fence the owner must still hold"},
    {NULL, "--force", NULL, FLAG(force), "init: declare the server empty although it holds simba keys"},
    {"-v", "--verbose", NULL, FLAG(verbose), "run/elect: report acquisitions and losses on stderr"},
    {NULL, "--stats-file", "FILE", 0, opt_stats_file, "run/elect: at exit, write the statistics and exit status to FILE\n"
                                                      "in the Prometheus text format (via FILE.tmp.PID, renamed)"},
    {NULL, "--no-stats-socket", NULL, FLAG(no_stats_socket), "run/elect: no statistics socket (and no SIMBA_STATS_SOCKET)"},
    {NULL, "--stats", "SOCKET", 0, opt_stats, "get: the statistics socket to ask (default $SIMBA_STATS_SOCKET,\n"
                                              "used only when it serves NAME on the same backend); yield:\n"
                                              "the holder to ask (default: found among this user's sockets)"},
};
#define N_OPTIONS (int)(sizeof options / sizeof options[0])

static void usage_options(FILE *f) {
    int i;
    fprintf(f, "options:\n");
    for (i = 0; i < N_OPTIONS; i++) {
        const option_t *op = &options[i];
        char col[64];
        const char *h = op->help;
        snprintf(col, sizeof col, "%s%s%s%s%s", op->shortname ? op->shortname : "", op->shortname ? ", " : "", op->name, op->arg ? " " : "",
                 op->arg ? op->arg : "");
        fprintf(f, "  %-20s %s", col, strlen(col) > 20 ? " " : "");
        while (*h) { /* continuation lines under the text */
            size_t n = strcspn(h, "\n");
            fprintf(f, "%.*s\n", (int)n, h);
            h += n;
            if (*h) { h++; fprintf(f, "%23s", ""); }
        }
    }
}

static const option_t *find_option(const char *a) {
    int i;
    for (i = 0; i < N_OPTIONS; i++)
        if ((options[i].shortname && strcmp(a, options[i].shortname) == 0) || strcmp(a, options[i].name) == 0) return &options[i];
    return NULL;
}

/* Options may come before or after NAME; "--" ends them (run/elect: CMD follows). */
static int parse_opts(const char *cmd, int argc, char **argv, opts_t *o) {
    int i, npos = 0;
    for (i = 0; i < argc; i++) {
        const char *a = argv[i];
        const option_t *op;
        if (strcmp(a, "--") == 0) {
            o->cmd = argv[i + 1] ? argv + i + 1 : NULL;
            break;
        }
        op = a[0] == '-' && a[1] ? find_option(a) : NULL;
        if (op && op->arg) {
            if (i + 1 >= argc) { errorf("%s %s: missing value", cmd, a); return -1; }
            if (op->set(o, a, argv[++i])) return -1;
        } else if (op && op->set == NULL && op->flag) {
            *(int *)(void *)((char *)o + op->flag) = 1;
        } else if (a[0] == '-' && a[1]) {
            errorf("%s: unknown option '%s' (see simba --help)", cmd, a);
            return -1;
        } else if (npos++ == 0) {
            o->name = a;
        } else {
            errorf("%s: unexpected argument '%s' (a command goes after --)", cmd, a);
            return -1;
        }
    }
    return 0;
}

static int check_name(const char *cmd, const char *name) {
    if (!name) { errorf("%s: missing the mutex NAME", cmd); return -1; }
    if (simba_name_check(name) != SIMBA_OK) {
        errorf("%s: '%s' is not a mutex name (1..%d of letters, digits and - _ . : @ + = ,)", cmd, name, SIMBA_NAME_MAX);
        return -1;
    }
    return 0;
}

/* ---- library side: loop and backend --------------------------------------------------------- */

static char last_log[512];
static int verbose_log;

static void log_hook(void *u, simba_log_level lv, const char *msg) {
    (void)u;
    if (lv >= SIMBA_LOG_WARN) snprintf(last_log, sizeof last_log, "%s", msg);
    if (verbose_log) fprintf(stderr, "%s: log: %s\n", prog, msg);
}

/* A backend that did not open: its loop goes too, and the exit status says whose fault. */
static int open_lib_fail(simba_loop **loop, int rc) {
    simba_loop_free(*loop);
    *loop = NULL;
    return rc == SIMBA_EINVAL ? EXIT_USAGE : rc == SIMBA_EDENIED ? EXIT_NOPERM : EXIT_BACKEND;
}

/* MySQL: the connection is made in the loop; read_only has no meaning there (no file). */
static int open_mysql(const url_t *u, simba_loop *loop, simba_backend **be) {
    simba_mysql_desc d;
    memset(&d, 0, sizeof d);
    d.host = u->socket[0] ? NULL : u->host;
    d.unix_socket = u->socket[0] ? u->socket : NULL;
    d.port = u->port;
    d.user = u->user[0] ? u->user : NULL;
    d.password = u->password[0] ? u->password : NULL;
    d.db = u->dbname;
    d.table = u->table;
    d.ssl_mode = u->sslmode[0] ? u->sslmode : NULL;
    d.ssl_ca = u->sslrootcert[0] ? u->sslrootcert : NULL;
    d.ssl_cert = u->sslcert[0] ? u->sslcert : NULL;
    d.ssl_key = u->sslkey[0] ? u->sslkey : NULL;
    d.connections = u->connections[0] ? atoi(u->connections) : 0;
    return simba_mysql_open(loop, &d, be);
}

static int open_lib(const url_t *u, int64_t ttl_ms, int64_t transition_ms, int read_only, simba_loop **loop, simba_backend **be) {
    simba_loop_desc ld;
    int rc;
    memset(&ld, 0, sizeof ld);
    ld.log = log_hook;
    ld.log_level = SIMBA_LOG_WARN;
    rc = simba_loop_new(&ld, loop);
    if (rc != SIMBA_OK) { errorf("simba_loop_new: %s", simba_strerror(rc)); return EXIT_SOFTWARE; }
    if (u->kind == BE_SQLITE) {
        simba_sql_desc d;
        char err[512] = "";
        memset(&d, 0, sizeof d);
        d.path = u->path;
        d.read_only = read_only;
        d.errbuf = err;
        d.errbuf_cap = sizeof err;
        rc = simba_sql_open(*loop, &d, be);
        if (rc != SIMBA_OK) { errorf("sqlite:%s: %s (%s)", u->path, err[0] ? err : simba_loop_errmsg(*loop), simba_strerror(rc)); return open_lib_fail(loop, rc); }
    } else if (u->kind == BE_REDIS) {
        simba_redis_desc d;
        memset(&d, 0, sizeof d);
        d.host = u->host;
        d.port = u->port;
        d.db = u->db;
        d.password = getenv("SIMBA_REDIS_PASSWORD");
        d.username = getenv("SIMBA_REDIS_USERNAME");
        if (d.password && !*d.password) d.password = NULL;
        if (d.username && !*d.username) d.username = NULL;
        rc = simba_redis_open(*loop, &d, be);
        if (rc != SIMBA_OK) { errorf("redis://%s:%d: %s (%s)", u->host, u->port, simba_loop_errmsg(*loop), simba_strerror(rc)); return open_lib_fail(loop, rc); }
    } else if (u->kind == BE_PG) {
        simba_pg_desc d;
        memset(&d, 0, sizeof d);
        d.hostaddr = u->host;
        d.port = u->port;
        d.user = u->user[0] ? u->user : NULL;     /* else PGUSER, else the login name (libpq) */
        d.dbname = u->dbname[0] ? u->dbname : NULL;
        d.table = u->table;                        /* the password: PGPASSWORD or ~/.pgpass (libpq) */
        d.sslmode = u->sslmode[0] ? u->sslmode : NULL; /* NULL: PGSSLMODE etc., else libpq's default */
        d.sslrootcert = u->sslrootcert[0] ? u->sslrootcert : NULL;
        d.sslcert = u->sslcert[0] ? u->sslcert : NULL;
        d.sslkey = u->sslkey[0] ? u->sslkey : NULL;
        d.tls_name = u->tls_name[0] ? u->tls_name : NULL;
        rc = simba_pg_open(*loop, &d, be);
        if (rc != SIMBA_OK) { errorf("postgres://%s:%d: %s (%s)", u->host, u->port, simba_loop_errmsg(*loop), simba_strerror(rc)); return open_lib_fail(loop, rc); }
    } else if (u->kind == BE_MYSQL) {
        rc = open_mysql(u, *loop, be);
        if (rc != SIMBA_OK && u->socket[0]) errorf("mysql socket %s: %s (%s)", u->socket, simba_loop_errmsg(*loop), simba_strerror(rc));
        else if (rc != SIMBA_OK) errorf("mysql://%s:%d: %s (%s)", u->host, u->port, simba_loop_errmsg(*loop), simba_strerror(rc));
        if (rc != SIMBA_OK) return open_lib_fail(loop, rc);
    } else {
        simba_zk_desc d;
        int64_t t = ttl_ms + transition_ms;
        memset(&d, 0, sizeof d);
        d.hosts = u->hosts;
        d.root = u->root;
        d.session_timeout_ms = t > 0 && t < 600000 ? (int)t : 10000;
        if (!getenv("SIMBA_DEBUG")) zoo_set_debug_level((ZooLogLevel)0);
        rc = simba_zk_open(*loop, &d, be);
        if (rc != SIMBA_OK) { errorf("zk://%s%s: %s (%s)", u->hosts, u->root, simba_loop_errmsg(*loop), simba_strerror(rc)); return open_lib_fail(loop, rc); }
    }
    return EXIT_OK;
}

/* ---- signals: a self-pipe carries signal numbers into the poll loop ------------------------ */

static int sigpipe_fd[2] = {-1, -1};

static void on_signal(int sig) {
    int e = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t w = write(sigpipe_fd[1], &b, 1); /* full pipe: the loop is awake anyway */
    (void)w;
    errno = e;
}

static const int fwd_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_FWD ((int)(sizeof fwd_sigs / sizeof fwd_sigs[0]))

static int setup_signals(int with_child) {
    struct sigaction sa;
    int i;
    if (pipe(sigpipe_fd) != 0) { errorf("pipe: %s", strerror(errno)); return -1; }
    for (i = 0; i < 2; i++) {
        fcntl(sigpipe_fd[i], F_SETFD, FD_CLOEXEC);
        fcntl(sigpipe_fd[i], F_SETFL, fcntl(sigpipe_fd[i], F_GETFL) | O_NONBLOCK);
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (i = 0; i < N_FWD; i++) sigaction(fwd_sigs[i], &sa, NULL);
    if (with_child) sigaction(SIGCHLD, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    /* While the command has the terminal, our own messages must not stop us (TOSTOP). */
    if (with_child) sigaction(SIGTTOU, &sa, NULL);
    return 0;
}

/* Next signal number from the self-pipe, or 0. */
static int next_signal(void) {
    unsigned char b;
    ssize_t r = read(sigpipe_fd[0], &b, 1);
    return r == 1 ? b : 0;
}

static int stats_fd = -1; /* run/elect: the listening statistics socket, -1 = none */
/* Clients of the stats socket that have not said what they want yet: served when their
   request line comes, when they close their side, or STATS_REQ_MS after they connected. */
#define STATS_PENDING 8
#define STATS_REQ_MS 200
typedef struct stats_client {
    int fd;
    int64_t until;
    size_t len;
    char req[8];
} stats_client;
static stats_client stats_pend[STATS_PENDING];
static int n_stats_pend;
static void stats_serve(const struct pollfd *pend, int npend, int accept_ready);
struct runner;
static void yield_request(struct runner *r, int client_fd);

/* Waits on the library's descriptors, the self-pipe and the stats socket with its pending
   clients, up to wait_ms. */
static int wait_io(simba_loop *loop, int64_t wait_ms) {
    struct pollfd fds[65 + STATS_PENDING];
    int n = simba_fds(loop, fds, 63), r, k, ks = -1, i;
    if (n < 0) n = 0;
    if (n > 63) n = 63; /* more fds than room: the poll's own zero-timeout check covers them */
    k = n;
    fds[k].fd = sigpipe_fd[0];
    fds[k].events = POLLIN;
    fds[k++].revents = 0;
    if (stats_fd >= 0) {
        int64_t now = mono_ms();
        ks = k;
        fds[k].fd = stats_fd;
        fds[k].events = POLLIN;
        fds[k++].revents = 0;
        for (i = 0; i < n_stats_pend; i++) {
            fds[k].fd = stats_pend[i].fd;
            fds[k].events = POLLIN;
            fds[k++].revents = 0;
            if (stats_pend[i].until - now < wait_ms) wait_ms = stats_pend[i].until - now;
        }
    }
    if (wait_ms > SIMBA_MAX_WAIT_MS) wait_ms = SIMBA_MAX_WAIT_MS;
    if (wait_ms < 0) wait_ms = 0;
    r = poll(fds, (nfds_t)k, (int)wait_ms);
    if (r < 0 && errno != EINTR) { errorf("poll: %s", strerror(errno)); return -1; }
    if (ks >= 0) stats_serve(fds + ks + 1, k - ks - 1, r > 0 && fds[ks].revents);
    return 0;
}

/* ---- run and elect ------------------------------------------------------------------------- */

typedef struct runner runner;
struct runner {
    simba_loop *loop;
    simba_backend *be;
    simba_service *svc;
    const opts_t *o;
    int elect;
    int owner;          /* on_acquired seen, on_released not since */
    uint64_t fence;     /* of the current ownership */
    int other_seen;     /* another contender named as live owner (for -n) */
    char other[SIMBA_ID_MAX + 1];
    uint64_t other_fence;
    pid_t child;        /* 0 = none */
    int lost;           /* the lease ended while the child ran */
    int64_t kill_at;    /* SIGKILL the group then (0 = not armed) */
    int stopping;       /* we release on purpose: on_released is not a loss */
    int status;         /* exit status of the last child */
    int reaped;
    int tty;            /* terminal whose foreground we hand to the command, or -1 */
    int unreachable;    /* leaving for --connect-timeout: no release is worth waiting for */
    int yield_state;    /* YIELD_*: a yield asked for (simba yield, --yield-on) in progress */
    int yield_go;       /* CHECKING found waiters: the loop goes on to STOPPING */
    int yield_ended;    /* a yield that stopped the command has run its course */
    simba_view yield_view; /* CHECKING: the store's answer */
    int yield_fd[8];    /* simba yield clients waiting for the outcome */
    int n_yield_fd;
};

/* A yield stops the command first, then asks the store: the lock must never pass on while
   the command still runs. The store's queue is read first, so that a leader nobody waits
   for keeps its command running.
     NONE --request--> CHECKING (simba_inspect) --nobody waits--> NONE: kept
     CHECKING --waiters (or no answer)--> STOPPING (command signalled; SIGKILL after --grace)
     STOPPING --command reaped--> ASKED (simba_yield sent) --outcome--> NONE
     CHECKING --waiters, no command--> ASKED
   The outcome: passed (on_released "yielded"), kept (nobody live waits: elect starts the
   command again, run exits 76), failed (the store's error), lost (the lease ended). */
enum { YIELD_NONE = 0, YIELD_CHECKING, YIELD_STOPPING, YIELD_ASKED };

/* ---- the statistics socket of run / elect ------------------------------------------------
   The process that holds the service answers for its statistics: a private AF_UNIX stream
   socket (directory 0700, socket 0600, removed at exit) whose path the command gets in
   SIMBA_STATS_SOCKET. A client sends one request line: "stats\n" (or anything else, or
   nothing: it closes its side, or STATS_REQ_MS pass) gets the statistics in one
   non-blocking write of a few hundred bytes, then close, so no client can hold up a
   renewal. The reply is text, a header line then "key value" lines:
       simba-stats 1 / mutex / backend / contender / pid / command_pid / owner / fence /
       acquisitions / releases / release.<reason> ... / step_downs / attempts / renewals /
       renewals_failed / errors / held_ms / held_total_ms / waits / wait_total_ms /
       wait_max_ms / waiting_ms / last_error [/ last_error_name / last_error_ago_ms /
       last_error_msg]
   "yield\n" asks the holder to yield (see YIELD_*); the connection stays open until the
   outcome:
       simba-yield 1 / result passed|kept|failed|lost|not-owner|busy / mutex / fence
       [/ message]
   With STATS_PENDING clients already waiting to be heard, a new one gets the statistics at
   once: a yield client then asks again.                                                    */

#define STATS_HEADER "simba-stats 1"
#define YIELD_HEADER "simba-yield 1"

static char stats_path[108];                   /* sun_path is 108 bytes on Linux */
static char stats_dir[sizeof stats_path - sizeof "/stats.sock" + 1];
static runner *stats_runner;
static char stats_backend[4400];

static void stats_close(void) {
    while (n_stats_pend > 0) close(stats_pend[--n_stats_pend].fd);
    if (stats_fd >= 0) close(stats_fd);
    stats_fd = -1;
    if (stats_path[0]) unlink(stats_path);
    if (stats_dir[0]) rmdir(stats_dir);
    stats_path[0] = stats_dir[0] = 0;
}

/* A directory of our own under $XDG_RUNTIME_DIR, $TMPDIR or /tmp (the first that is usable
   and short enough for sun_path). 0 on success; else a warning and no socket. */
static int stats_open(runner *r, const url_t *u) {
    const char *base[3];
    struct sockaddr_un sa;
    mode_t old;
    int i, fd;
    base[0] = getenv("XDG_RUNTIME_DIR");
    base[1] = getenv("TMPDIR");
    base[2] = "/tmp";
    for (i = 0; i < 3; i++) {
        if (!base[i] || base[i][0] != '/' || strlen(base[i]) + sizeof "/simba-XXXXXX" > sizeof stats_dir) continue;
        snprintf(stats_dir, sizeof stats_dir, "%s/simba-XXXXXX", base[i]);
        if (mkdtemp(stats_dir)) break; /* mode 0700 */
        stats_dir[0] = 0;
    }
    if (!stats_dir[0]) { errorf("stats socket: no usable directory ($XDG_RUNTIME_DIR, $TMPDIR, /tmp): running without it"); return -1; }
    snprintf(stats_path, sizeof stats_path, "%s/stats.sock", stats_dir);
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, stats_path, strlen(stats_path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) { errorf("stats socket: %s: running without it", strerror(errno)); stats_close(); return -1; }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    old = umask(0177); /* the socket is born 0600: no window in which others may connect */
    i = bind(fd, (struct sockaddr *)(void *)&sa, sizeof sa);
    umask(old);
    if (i != 0 || listen(fd, 16) != 0) {
        errorf("stats socket %s: %s: running without it", stats_path, strerror(errno));
        close(fd);
        stats_close();
        return -1;
    }
    stats_fd = fd;
    stats_runner = r;
    backend_id(u, stats_backend, sizeof stats_backend);
    atexit(stats_close);
    return 0;
}

/* Appends to buf at *n, never past cap. */
static void put(char *buf, size_t cap, size_t *n, const char *fmt, ...) {
    va_list ap;
    int w;
    if (*n >= cap) return;
    va_start(ap, fmt);
    w = vsnprintf(buf + *n, cap - *n, fmt, ap);
    va_end(ap);
    if (w > 0) *n = *n + (size_t)w < cap ? *n + (size_t)w : cap;
}

static size_t stats_format(const runner *r, char *buf, size_t cap) {
    simba_stats st;
    size_t n = 0;
    int k;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if (!r->svc || simba_service_stats(r->svc, &st) != SIMBA_OK) return 0;
    put(buf, cap, &n, STATS_HEADER "\nmutex %s\nbackend %s\ncontender %s\npid %ld\ncommand_pid %ld\nowner %d\nfence %llu\n",
        r->o->name, stats_backend, simba_service_contender_id(r->svc), (long)getpid(), (long)r->child,
        simba_is_owner(r->svc) ? 1 : 0, (unsigned long long)simba_fence(r->svc));
    put(buf, cap, &n, "acquisitions %llu\nreleases %llu\n", (unsigned long long)st.acquisitions, (unsigned long long)st.releases);
    for (k = SIMBA_REASON_NONE + 1; k < SIMBA_REASON_COUNT_; k++)
        put(buf, cap, &n, "release.%s %llu\n", simba_reason_str(k), (unsigned long long)st.releases_by_reason[k]);
    put(buf, cap, &n, "step_downs %llu\nattempts %llu\nrenewals %llu\nrenewals_failed %llu\nerrors %llu\n",
        (unsigned long long)st.step_downs, (unsigned long long)st.attempts, (unsigned long long)st.renewals,
        (unsigned long long)st.renewals_failed, (unsigned long long)st.errors);
    put(buf, cap, &n, "held_ms %lld\nheld_total_ms %lld\nwaits %llu\nwait_total_ms %lld\nwait_max_ms %lld\nwaiting_ms %lld\nlast_error %d\n",
        (long long)st.held_ms, (long long)st.held_total_ms, (unsigned long long)st.waits, (long long)st.wait_total_ms,
        (long long)st.wait_max_ms, (long long)st.waiting_ms, st.last_error);
    if (st.last_error != SIMBA_OK) {
        char msg[sizeof st.last_error_msg];
        size_t i;
        snprintf(msg, sizeof msg, "%s", st.last_error_msg);
        for (i = 0; msg[i]; i++)
            if (msg[i] == '\n' || msg[i] == '\r') msg[i] = ' ';
        put(buf, cap, &n, "last_error_name %s\nlast_error_ago_ms %lld\nlast_error_msg %s\n", simba_strerror(st.last_error),
            (long long)(simba_now(r->loop) - st.last_error_at), msg);
    }
    return n;
}

/* What a client asks for: 1 a yield, 0 the statistics (any other line, or it closed its
   side), -1 not said yet. Reads what is there, never waits. */
static int stats_read_req(stats_client *c) {
    ssize_t q = recv(c->fd, c->req + c->len, sizeof c->req - c->len, MSG_DONTWAIT);
    if (q > 0) c->len += (size_t)q;
    if (c->len >= 6 && memcmp(c->req, "yield\n", 6) == 0) return 1;
    if (memchr(c->req, '\n', c->len) || c->len == sizeof c->req) return 0;
    if (q == 0 || (q < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return 0;
    return -1;
}

/* The statistics in one write (non-blocking; the reply fits the socket buffer), then close. */
static void stats_answer(int fd) {
    char buf[4096];
    size_t n = stats_runner ? stats_format(stats_runner, buf, sizeof buf) : 0;
    if (n > 0) {
        ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
        (void)w; /* a client that went away gets nothing */
    }
    close(fd);
}

static void stats_dispatch(stats_client *c, int what) {
    if (what == 1 && stats_runner) yield_request(stats_runner, c->fd); /* answered with the outcome */
    else stats_answer(c->fd);
}

/* Serves the pending clients that poll reported (pend) or whose time is up, then accepts new
   ones (at most 16 per wake-up). Nothing here waits: a client can never delay a renewal. */
static void stats_serve(const struct pollfd *pend, int npend, int accept_ready) {
    int64_t now = mono_ms();
    int i, j, what;
    for (i = 0; i < n_stats_pend;) {
        stats_client *c = &stats_pend[i];
        int ready = 0;
        for (j = 0; j < npend; j++)
            if (pend[j].fd == c->fd && pend[j].revents) ready = 1;
        what = ready ? stats_read_req(c) : -1;
        if (what < 0 && now >= c->until) what = 0;
        if (what < 0) { i++; continue; }
        stats_dispatch(c, what);
        stats_pend[i] = stats_pend[--n_stats_pend];
    }
    for (i = 0; accept_ready && i < 16 && stats_fd >= 0; i++) {
        stats_client c;
        c.fd = accept(stats_fd, NULL, NULL);
        if (c.fd < 0) return;
        fcntl(c.fd, F_SETFL, fcntl(c.fd, F_GETFL) | O_NONBLOCK);
        c.len = 0;
        c.until = now + STATS_REQ_MS;
        what = stats_read_req(&c);
        if (what < 0 && n_stats_pend == STATS_PENDING) what = 0; /* no room: statistics now */
        if (what < 0) stats_pend[n_stats_pend++] = c;
        else stats_dispatch(&c, what);
    }
}

/* --stats-file: the service's counters in the Prometheus text format, written when simba
   exits (to FILE.tmp, then renamed: a collector never reads half a file). */
static void prom_label(char *out, size_t cap, const char *s) {
    size_t n = 0;
    for (; *s && n + 3 < cap; s++) {
        if (*s == '"' || *s == '\\') out[n++] = '\\';
        if (*s == '\n') { out[n++] = '\\'; out[n++] = 'n'; continue; }
        out[n++] = *s;
    }
    out[n] = 0;
}

static void stats_file_write(const runner *r, const simba_stats *st, int status) {
    char tmp[4200], lbl[4 * SIMBA_NAME_MAX + 4 * SIMBA_ID_MAX + 64], m[2 * SIMBA_NAME_MAX + 1], c[2 * SIMBA_ID_MAX + 1];
    FILE *f;
    int k;
    const char *cid = r->svc ? simba_service_contender_id(r->svc) : NULL;
    if (strlen(r->o->stats_file) + 24 > sizeof tmp) { errorf("--stats-file: path too long"); return; }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", r->o->stats_file, (long)getpid());
    prom_label(m, sizeof m, r->o->name);
    prom_label(c, sizeof c, cid ? cid : "");
    snprintf(lbl, sizeof lbl, "mutex=\"%s\",contender=\"%s\"", m, c);
    f = fopen(tmp, "w");
    if (!f) { errorf("--stats-file %s: %s", tmp, strerror(errno)); return; }
#define PC(name, type, help, v) fprintf(f, "# HELP simba_" name " " help "\n# TYPE simba_" name " " type "\nsimba_" name "{%s} %llu\n", lbl, (unsigned long long)(v))
#define PS(name, type, help, v) fprintf(f, "# HELP simba_" name " " help "\n# TYPE simba_" name " " type "\nsimba_" name "{%s} %.3f\n", lbl, (double)(v) / 1000.0)
    PC("acquisitions_total", "counter", "Ownerships gained.", st->acquisitions);
    fprintf(f, "# HELP simba_releases_total Ownerships left, by reason.\n# TYPE simba_releases_total counter\n");
    for (k = SIMBA_REASON_NONE + 1; k < SIMBA_REASON_COUNT_; k++)
        fprintf(f, "simba_releases_total{%s,reason=\"%s\"} %llu\n", lbl, simba_reason_str(k), (unsigned long long)st->releases_by_reason[k]);
    PC("step_downs_total", "counter", "Releases simba did not ask for.", st->step_downs);
    PC("attempts_total", "counter", "Acquire requests sent, renewals included.", st->attempts);
    PC("renewals_total", "counter", "Renewals confirmed in time.", st->renewals);
    PC("renewals_failed_total", "counter", "Renewals failed, refused or confirmed late.", st->renewals_failed);
    PC("errors_total", "counter", "Requests answered with an error.", st->errors);
    PS("hold_seconds_total", "counter", "Time spent owning, all ownerships.", st->held_total_ms);
    PC("waits_total", "counter", "Completed waits to acquire.", st->waits);
    PS("wait_seconds_total", "counter", "Time spent waiting to acquire.", st->wait_total_ms);
    PS("wait_seconds_max", "gauge", "Longest wait to acquire.", st->wait_max_ms);
    PC("exit_status", "gauge", "Exit status of this simba run.", status);
    PC("end_time_seconds", "gauge", "When this simba run ended (Unix time).", wall_ms() / 1000);
#undef PC
#undef PS
    if (st->last_error != SIMBA_OK) {
        char e[2 * sizeof st->last_error_msg + 1];
        prom_label(e, sizeof e, st->last_error_msg);
        fprintf(f, "# HELP simba_last_error_info The latest failed request (value 1).\n# TYPE simba_last_error_info gauge\n");
        fprintf(f, "simba_last_error_info{%s,code=\"%d\",message=\"%s\"} 1\n", lbl, st->last_error, e);
    }
    if (fclose(f) != 0 || rename(tmp, r->o->stats_file) != 0) {
        errorf("--stats-file %s: %s", r->o->stats_file, strerror(errno));
        unlink(tmp);
    }
}

/* Gives the terminal's foreground to process group pg. SIGTTOU is blocked because the
   caller may be in a background group at that moment. */
static void tty_give(int tty, pid_t pg) {
    sigset_t ttou, old;
    if (tty < 0) return;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    sigprocmask(SIG_BLOCK, &ttou, &old);
    tcsetpgrp(tty, pg);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

static void kill_group(runner *r, int sig) {
    if (r->child > 0) kill(-r->child, sig);
}

static void on_acq(simba_service *svc, const simba_state *st, void *u) {
    runner *r = (runner *)u;
    (void)svc;
    r->owner = 1;
    r->fence = st->after->fence;
    if (r->o->verbose) fprintf(stderr, "%s: acquired %s fence %llu\n", prog, r->o->name, (unsigned long long)r->fence);
}

/* Tells a simba yield client the outcome (one non-blocking write; the reply fits the socket
   buffer) and closes it. */
static void yield_reply(const runner *r, int fd, const char *result, const char *msg) {
    char buf[700];
    size_t n = 0;
    ssize_t w;
    put(buf, sizeof buf, &n, YIELD_HEADER "\nresult %s\nmutex %s\nfence %llu\n", result, r->o->name, (unsigned long long)r->fence);
    if (msg && *msg) {
        size_t k = n;
        put(buf, sizeof buf, &n, "message %.500s", msg);
        for (; k < n; k++)
            if (buf[k] == '\n' || buf[k] == '\r') buf[k] = ' ';
        put(buf, sizeof buf, &n, "\n");
    }
    w = send(fd, buf, n, MSG_NOSIGNAL);
    (void)w; /* a client that went away gets nothing */
    close(fd);
}

/* Tells every client waiting for the yield. */
static void yield_answer(runner *r, const char *result, const char *msg) {
    int i;
    for (i = 0; i < r->n_yield_fd; i++) yield_reply(r, r->yield_fd[i], result, msg);
    r->n_yield_fd = 0;
}

static void yield_end(runner *r, const char *result, const char *msg) {
    r->yield_ended = r->yield_state == YIELD_STOPPING || r->yield_state == YIELD_ASKED;
    r->yield_state = YIELD_NONE;
    r->yield_go = 0;
    if (r->o->verbose) fprintf(stderr, "%s: yield of %s (fence %llu): %s%s%s\n", prog, r->o->name, (unsigned long long)r->fence, result,
                               msg ? ": " : "", msg ? msg : "");
    yield_answer(r, result, msg);
}

/* The command is gone (or there was none): ask the store. */
static void yield_ask(runner *r) {
    int rc = simba_yield(r->svc);
    if (rc != SIMBA_OK) { yield_end(r, rc == SIMBA_EFENCE ? "lost" : "failed", simba_loop_errmsg(r->loop)); return; }
    r->yield_state = YIELD_ASKED;
}

/* Waiters queued (or the store did not say): stop the command, then ask the store. */
static void yield_stop(runner *r) {
    if (r->child > 0) {
        r->yield_state = YIELD_STOPPING;
        kill_group(r, r->o->sig);
        r->kill_at = mono_ms() + r->o->grace_ms;
        if (r->o->grace_ms == 0) { kill_group(r, SIGKILL); r->kill_at = 0; }
        return;
    }
    yield_ask(r);
}

/* The store's queue (a callback: the loop acts on it after the poll). */
static void on_yield_view(const simba_view *v, simba_result rc, void *u) {
    runner *r = (runner *)u;
    if (r->yield_state != YIELD_CHECKING) return;
    if (rc == SIMBA_OK && v && v->waiters == 0) yield_end(r, "kept", "nobody waits");
    else r->yield_go = 1;
}

/* A yield asked for by a client (its fd, kept for the answer) or by --yield-on (-1). */
static void yield_request(runner *r, int fd) {
    if (fd >= 0) {
        if (r->n_yield_fd == (int)(sizeof r->yield_fd / sizeof r->yield_fd[0])) {
            yield_reply(r, fd, "busy", "too many yield requests at once");
            return;
        }
        r->yield_fd[r->n_yield_fd++] = fd;
    }
    if (r->yield_state != YIELD_NONE) return; /* joins the yield in progress */
    if (!r->owner || r->lost || !simba_is_owner(r->svc)) {
        if (r->o->verbose) fprintf(stderr, "%s: yield of %s: not the owner\n", prog, r->o->name);
        yield_answer(r, "not-owner", NULL);
        return;
    }
    r->yield_state = YIELD_CHECKING;
    if (simba_inspect(r->be, r->o->name, &r->yield_view, on_yield_view, r) != SIMBA_OK) yield_stop(r);
}

static void on_ev(simba_service *svc, const simba_service_event *ev, void *u) {
    runner *r = (runner *)u;
    (void)svc;
    if (r->yield_state != YIELD_ASKED) return;
    if (ev->type == SIMBA_EVENT_YIELD_KEPT) yield_end(r, "kept", "nobody waits");
    else if (ev->type == SIMBA_EVENT_YIELD_FAILED) yield_end(r, "failed", ev->msg);
}

static void on_rel(simba_service *svc, const simba_state *st, void *u) {
    runner *r = (runner *)u;
    r->owner = 0;
    if (r->stopping) return;
    if (st->reason == SIMBA_REASON_YIELDED) { /* the command was stopped before the yield */
        yield_end(r, "passed", NULL);
        return;
    }
    if (r->yield_state != YIELD_NONE) yield_end(r, "lost", simba_reason_str(st->reason));
    if (r->o->verbose) fprintf(stderr, "%s: lease of %s (fence %llu) lost\n", prog, r->o->name, (unsigned long long)r->fence);
    if (r->child > 0 && !r->lost) {
        /* Signal at once, from the dispatch: the grace period must end inside the
           transition window, before anyone else can win. */
        r->lost = 1;
        /* run (and elect --once) leaves when the command has ended: it stops contending
           now, or it could win the name again during the grace and leave it with a new
           fence */
        if (!r->elect || r->o->once) {
            r->stopping = 1;
            simba_stop(svc);
        }
        kill_group(r, r->o->sig);
        r->kill_at = mono_ms() + r->o->grace_ms;
        if (r->o->grace_ms == 0) { kill_group(r, SIGKILL); r->kill_at = 0; }
    }
}

static void on_own(simba_service *svc, const simba_state *st, void *u) {
    runner *r = (runner *)u;
    const char *me = simba_service_contender_id(svc);
    if (st->after->id[0] && (!me || strcmp(st->after->id, me) != 0)) {
        r->other_seen = 1;
        snprintf(r->other, sizeof r->other, "%s", st->after->id);
        r->other_fence = st->after->fence;
    }
}

static void child_exec(const opts_t *o, uint64_t fence, int tty) {
    char buf[32];
    struct sigaction sa;
    sigset_t none;
    int i;
    long maxfd;
    setpgid(0, 0);
    tty_give(tty, getpid()); /* both sides: the command may read the terminal at once */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (i = 0; i < N_FWD; i++) sigaction(fwd_sigs[i], &sa, NULL);
    sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL);
    sigaction(SIGTTOU, &sa, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)fence);
    setenv("SIMBA_FENCE", buf, 1);
    setenv("SIMBA_MUTEX", o->name, 1);
    setenv("SIMBA_VALUE", o->value ? o->value : "", 1);
    if (stats_path[0] && stats_fd >= 0) setenv("SIMBA_STATS_SOCKET", stats_path, 1);
    else unsetenv("SIMBA_STATS_SOCKET"); /* an outer simba's socket speaks of another service */
    /* The command must not hold the backend's sockets or database open after we exit. */
    maxfd = sysconf(_SC_OPEN_MAX);
    if (maxfd < 0 || maxfd > 65536) maxfd = 65536;
    for (i = 3; i < maxfd; i++) close(i);
    execvp(o->cmd[0], o->cmd);
    {
        int e = errno;
        fprintf(stderr, "%s: cannot run '%s': %s\n", prog, o->cmd[0], strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
}

static int spawn(runner *r) {
    pid_t pid = fork();
    if (pid < 0) { errorf("fork: %s", strerror(errno)); return -1; }
    if (pid == 0) child_exec(r->o, r->fence, r->tty);
    setpgid(pid, pid); /* both sides: whichever runs first makes the group */
    tty_give(r->tty, pid);
    r->child = pid;
    r->lost = 0;
    r->kill_at = 0;
    r->reaped = 0;
    return 0;
}

static void reap(runner *r) {
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
        if (p == r->child) {
            r->status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
            r->reaped = 1;
            tty_give(r->tty, getpgrp());
            /* The group may outlive its leader: a lost or yielded lease takes all of it. */
            if (r->lost || r->yield_state == YIELD_STOPPING) kill(-r->child, SIGKILL);
            r->child = 0;
        }
    }
}

/* Releases (bounded wait for the release to reach the server), writes --stats-file with the
   final counters (the release included) and exit status, and frees everything. */
static void finish(runner *r, int status) {
    int64_t end = mono_ms() + 3000;
    if (r->n_yield_fd) yield_answer(r, "failed", "simba is exiting");
    r->stopping = 1;
    if (r->svc && simba_service_status(r->svc) != SIMBA_INITIAL) {
        simba_stop(r->svc);
        for (; !r->unreachable;) {
            int64_t d = simba_poll(r->loop), left = end - mono_ms();
            if (d < 0 || simba_service_status(r->svc) == SIMBA_INITIAL || left <= 0) break;
            if (wait_io(r->loop, d < left ? d : left)) break;
        }
    }
    stats_close();
    if (r->o->stats_file && r->svc) {
        simba_stats st;
        memset(&st, 0, sizeof st);
        st.size = sizeof st;
        if (simba_service_stats(r->svc, &st) == SIMBA_OK) stats_file_write(r, &st, status);
    }
    simba_loop_free(r->loop);
    r->loop = NULL;
}

/* --connect-timeout: since when no request of the service has been answered without an
   error (0: the backend answers). A waiter asks at least every ttl + transition + jitter, and
   every backend ends an unanswered request with an error, so a backend that stops answering
   is seen within that time; a refusal (someone else holds it) is an answer. */
typedef struct reach_t {
    int64_t down_since;
    uint64_t answered, errors;
} reach_t;

static void reach_update(reach_t *rt, const simba_service *svc, int64_t now) {
    simba_stats st;
    uint64_t answered;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if (simba_service_stats(svc, &st) != SIMBA_OK) return;
    answered = st.attempts - st.in_flight;
    if (answered - rt->answered > st.errors - rt->errors) rt->down_since = 0;
    else if (st.errors != rt->errors && !rt->down_since) rt->down_since = now;
    rt->answered = answered;
    rt->errors = st.errors;
}

/* run / elect, phase 1: the value, signals, the backend and the contender. */
static int run_start(runner *r, const url_t *u, opts_t *o, int elect, char *host_pid, size_t cap) {
    simba_contend_desc cd;
    int rc;
    memset(r, 0, sizeof *r);
    r->o = o;
    /* Run from a terminal as its foreground job: the command gets the terminal (it may read
       it, ^C reaches it directly) and simba takes it back when the command ends. */
    r->tty = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp() ? STDIN_FILENO : -1;
    r->elect = elect;
    if (!o->have_value) { /* where the leader is: HOST:PID of this simba */
        char host[256];
        if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
        host[sizeof host - 1] = 0;
        snprintf(host_pid, cap, "%s:%ld", host, (long)getpid());
        o->value = host_pid;
    }
    if (setup_signals(1)) return EXIT_OSERR;
    rc = open_lib(u, o->ttl_ms, o->transition_ms, 0, &r->loop, &r->be);
    if (rc != EXIT_OK) return rc;
    memset(&cd, 0, sizeof cd);
    cd.mutex = o->name;
    cd.contender_id = o->id;
    cd.ttl_ms = o->ttl_ms;
    cd.transition_ms = o->transition_ms;
    cd.on_acquired = on_acq;
    cd.on_released = on_rel;
    cd.on_owner = on_own;
    cd.on_event = on_ev;
    cd.value = o->value;
    cd.value_len = strlen(o->value);
    cd.user_data = r;
    cd.permits = o->permits;
    cd.shared = o->shared;
    rc = simba_contend(r->loop, r->be, &cd, &r->svc);
    if (rc == SIMBA_OK) rc = simba_start(r->svc);
    if (rc != SIMBA_OK) {
        errorf("contend %s: %s (%s)", o->name, simba_loop_errmsg(r->loop), simba_strerror(rc));
        simba_loop_free(r->loop);
        return rc == SIMBA_EINVAL ? EXIT_USAGE : EXIT_SOFTWARE; /* a lease over the backend's max_lease_ms */
    }
    if (!o->no_stats_socket) stats_open(r, u); /* without it the lock still works */
    return EXIT_OK;
}

/* Phase 2, each turn: signals. -1 = go on, else simba exits with it (finished). */
static int run_signals(runner *r) {
    int sig;
    while ((sig = next_signal()) != 0) {
        if (sig == SIGCHLD) { reap(r); continue; }
        if (r->o->yield_sig && sig == r->o->yield_sig) { yield_request(r, -1); continue; }
        /* stopped while stopping the command to yield: simba ends with the command */
        if (r->yield_state == YIELD_STOPPING && (sig == SIGINT || sig == SIGTERM || sig == SIGQUIT))
            yield_end(r, "failed", "simba was stopped by a signal");
        if (r->child > 0) { kill_group(r, sig); continue; }
        if (sig == SIGUSR1 || sig == SIGUSR2) continue; /* nobody to forward to */
        finish(r, 128 + sig);
        return 128 + sig;
    }
    return -1;
}

/* Phase 2: the command and its lease. -1 = go on, -2 = next turn at once, else the exit
   status (*finished: finish() was called); started: the command ran once. */
static int run_command(runner *r, int *started, int *finished) {
    const opts_t *o = r->o;
    if (r->child == 0 && r->reaped) { /* the command has ended */
        r->reaped = 0;
        if (r->yield_state == YIELD_STOPPING) { yield_ask(r); return -2; }
        if (r->lost) {
            if (r->elect && !o->once) { r->lost = 0; return -2; } /* wait to lead again */
            errorf("lease of %s lost while the command ran: it was signalled (exit %d)", o->name, EXIT_LOST);
            finish(r, EXIT_LOST);
            *finished = 1;
            return EXIT_LOST;
        }
        return r->status;
    }
    if (r->yield_go) {
        r->yield_go = 0;
        yield_stop(r);
    }
    if (r->yield_ended && r->child == 0) { /* run: done; elect: leads again, or waits to */
        r->yield_ended = 0;
        if (!r->elect || (o->once && !r->owner)) {
            errorf("%s: the command was stopped to yield (exit %d)", o->name, EXIT_LOST);
            finish(r, EXIT_LOST);
            *finished = 1;
            return EXIT_LOST;
        }
    }
    if (r->child > 0 && r->kill_at && mono_ms() >= r->kill_at) {
        kill_group(r, SIGKILL);
        r->kill_at = 0;
    }
    if (r->child == 0 && r->owner && r->yield_state == YIELD_NONE && simba_is_owner(r->svc) && (r->elect || !*started)) {
        if (spawn(r)) return EXIT_OSERR;
        *started = 1;
        return -2;
    }
    return -1;
}

/* Phase 3, before the command first runs: held (-n), refused by the store, unreachable
   (--connect-timeout), or out of time (-w, -n). -1 = go on waiting. */
static int run_waiting(runner *r, reach_t *reach, int64_t now, int64_t decide_by) {
    const opts_t *o = r->o;
    simba_stats st;
    const char *e = simba_backend_errmsg(r->be);
    int idle = r->child == 0 && !r->owner;
    if (idle && o->nonblock && r->other_seen) {
        errorf("%s is held by %s (fence %llu)", o->name, r->other, (unsigned long long)r->other_fence);
        return EXIT_BUSY;
    }
    /* the store refused the request itself (another --permits than the holders'): waiting
       would not change that */
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if (idle && simba_service_stats(r->svc, &st) == SIMBA_OK && (st.last_error == SIMBA_ECONFLICT || st.last_error == SIMBA_EDENIED)) {
        /* the backend's own words are the longer copy (the privilege a role lacks) */
        errorf("%s: refused by the backend: %s (%s)", o->name, st.last_error == SIMBA_EDENIED && e && *e ? e : st.last_error_msg,
               simba_strerror(st.last_error));
        return st.last_error == SIMBA_EDENIED ? EXIT_NOPERM : EXIT_USAGE;
    }
    if (o->connect_ms && reach->down_since && now - reach->down_since >= o->connect_ms) {
        errorf("%s: no answer from the backend for %.3g s (--connect-timeout %.3g): %s", o->name, (double)(now - reach->down_since) / 1000.0,
               (double)o->connect_ms / 1000.0, e && *e ? e : "its requests were never answered");
        r->unreachable = 1;
        return EXIT_BACKEND;
    }
    if (!decide_by || now < decide_by) return -1;
    if (r->other_seen) {
        errorf("timed out waiting for %s (held by %s, fence %llu)", o->name, r->other, (unsigned long long)r->other_fence);
        return EXIT_BUSY;
    }
    if (!(e && *e) && !reach->down_since) { errorf("timed out waiting for %s", o->name); return EXIT_BUSY; }
    /* nobody was seen holding it: the store did not answer, which is no contention */
    if (e && *e) errorf("%s: the backend could not be reached: %s", o->name, e);
    else errorf("%s: the backend could not be reached: no answer for %.3g s", o->name, (double)(now - reach->down_since) / 1000.0);
    r->unreachable = 1;
    return EXIT_BACKEND;
}

static int cmd_run(const url_t *u, opts_t *o, int elect) {
    runner r;
    int ret, started = 0, finished = 0;
    int64_t start = mono_ms();
    int64_t decide_by = o->nonblock ? start + (o->have_wait ? o->wait_ms : 10000) : (o->have_wait ? start + o->wait_ms : 0);
    char said[256] = "", host_pid[300];
    reach_t reach;
    memset(&reach, 0, sizeof reach);
    reach.down_since = start; /* nothing answered yet */
    if ((ret = run_start(&r, u, o, elect, host_pid, sizeof host_pid)) != EXIT_OK) return ret;
    for (;;) {
        int64_t now, d = simba_poll(r.loop);
        if (d < 0) { errorf("poll: %s (%s)", simba_loop_errmsg(r.loop), simba_strerror((int)d)); ret = EXIT_SOFTWARE; break; }
        if ((ret = run_signals(&r)) >= 0) return ret;
        if ((ret = run_command(&r, &started, &finished)) == -2) continue;
        if (finished) return ret;
        if (ret >= 0) break;
        now = mono_ms();
        reach_update(&reach, r.svc, now);
        if (r.child > 0 || r.owner) reach.down_since = 0; /* holding: a lost lease ends the command, not this */
        if (!started && (ret = run_waiting(&r, &reach, now, decide_by)) >= 0) break;
        if (!decide_by && !started) { /* waiting without limit: say why, once per message */
            const char *e = simba_backend_errmsg(r.be);
            if (e && *e && strcmp(e, said) != 0) {
                errorf("waiting for %s: backend: %s", o->name, e);
                snprintf(said, sizeof said, "%s", e);
            }
        }
        if (r.child > 0 && r.kill_at && r.kill_at - now < d) d = r.kill_at - now;
        if (decide_by && !started && decide_by - now < d) d = decide_by - now;
        if (o->connect_ms && reach.down_since && reach.down_since + o->connect_ms - now < d) d = reach.down_since + o->connect_ms - now;
        if (wait_io(r.loop, d)) { ret = EXIT_OSERR; break; }
    }
    if (r.child > 0) { /* leaving with the command still running (an error): take it down */
        kill_group(&r, SIGTERM);
        kill_group(&r, SIGKILL);
    }
    finish(&r, ret);
    return ret;
}

/* ---- watch ------------------------------------------------------------------------------------ */

static int known(int64_t v) { return v != SIMBA_UNKNOWN_MS; }

/* A free mutex is shown with the fence its store keeps, as get shows it (an observer hears
   of no fence when nobody owns it): asked with simba_inspect, the line printed when the
   answer comes, or at once if an owner is heard of first. */
typedef struct watcher {
    const opts_t *o;
    simba_loop *loop;
    simba_backend *be;
    simba_view view;   /* the store's answer */
    int asking, stale; /* an inspection is out; its line was printed already */
    int printed;       /* a line was printed: the answer to the first inspection is not needed */
    int denied;        /* the store refused the login or a privilege: watching cannot begin */
    uint64_t free_fence;
    int64_t free_wall;
} watcher;

/* owner NULL: nobody owns it (value ignored). */
static void watch_line(watcher *w, const char *owner, uint64_t fence, int64_t ttl_left, int64_t wall, const unsigned char *value,
                       size_t value_len) {
    char ts[40];
    iso_time(wall, ts, sizeof ts);
    w->printed = 1;
    if (w->o->json) {
        printf("{\"time\":\"%s\",\"mutex\":", ts);
        json_str(stdout, w->o->name);
        printf(",\"owner\":");
        if (owner) json_str(stdout, owner); else printf("null");
        printf(",\"fence\":%llu,\"ttl_left_ms\":%lld,", (unsigned long long)fence, owner ? (long long)ttl_left : 0LL);
        json_value(stdout, value, value_len, owner != NULL);
        printf("}\n");
    } else if (owner) {
        printf("%s %s owner=%s fence=%llu ttl_left_ms=%lld value=", ts, w->o->name, owner, (unsigned long long)fence, (long long)ttl_left);
        text_value(stdout, value, value_len);
        printf("\n");
    } else {
        printf("%s %s owner=- fence=%llu\n", ts, w->o->name, (unsigned long long)fence);
    }
    fflush(stdout);
}

static void on_watch_store(const simba_view *v, simba_result rc, void *u) {
    watcher *w = (watcher *)u;
    w->asking = 0;
    if (w->stale) return;
    watch_line(w, NULL, rc == SIMBA_OK && v && !v->owner[0] ? v->fence : w->free_fence, 0, w->free_wall, NULL, 0);
}

/* The first inspection: an observer hears of owners only, so a name nobody owns at the
   start gets its line from the store. */
static void on_watch_first(const simba_view *v, simba_result rc, void *u) {
    watcher *w = (watcher *)u;
    w->asking = 0;
    if (rc == SIMBA_EDENIED) {
        errorf("%s: refused by the backend: %s (%s)", w->o->name, simba_backend_errmsg(w->be), simba_strerror(rc));
        w->denied = 1;
    }
    if (w->printed || rc != SIMBA_OK || !v || v->owner[0]) return;
    watch_line(w, NULL, v->fence, 0, wall_ms(), NULL, 0);
}

static void on_watch(simba_service *svc, const simba_state *st, void *u) {
    watcher *w = (watcher *)u;
    const simba_owner *a = st->after;
    (void)svc;
    if (w->asking && !w->stale && w->printed) { /* heard of an owner before the store answered */
        watch_line(w, NULL, w->free_fence, 0, w->free_wall, NULL, 0);
        w->stale = 1;
    }
    if (a->id[0]) {
        watch_line(w, a->id, a->fence, a->ttl_at - simba_now(w->loop), wall_ms(), a->value, a->value_len);
        return;
    }
    w->free_fence = a->fence;
    w->free_wall = wall_ms();
    if (!w->asking && simba_inspect(w->be, w->o->name, &w->view, on_watch_store, w) == SIMBA_OK) {
        w->asking = 1;
        w->stale = 0;
        return;
    }
    watch_line(w, NULL, a->fence, 0, w->free_wall, NULL, 0);
}

static int open_inspect(const url_t *u, const opts_t *o, int write, simba_loop **loop, simba_backend **be);
static int inspect_failed(const url_t *u, simba_loop *loop, const char *what, int rc);
/* How long one inspection may take: a connect and a few round trips (a listing of many
   mutexes on ZooKeeper reads each in turn). */
#define INSPECT_MS 10000

/* The file and its directory (for -wal and -shm) writable by this user. */
static int sqlite_writable(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path + (slash == path)) : 1, slash ? path : ".");
    return access(path, W_OK) == 0 && access(dir, W_OK) == 0;
}

/* A SQLite file this user may only read: an observer's reads need the file's write side
   (its -shm), and a read-only open without a -wal file reads a snapshot; so the file is
   opened anew and read every --refresh, and a line printed when owner or fence changes. */
static int watch_by_reads(const url_t *u, opts_t *o) {
    watcher w;
    char last[SIMBA_ID_MAX + 1] = "";
    uint64_t last_fence = 0;
    int printed = 0;
    memset(&w, 0, sizeof w);
    w.o = o;
    for (;;) {
        struct pollfd p;
        simba_view v;
        int sig, rc = open_inspect(u, o, 0, &w.loop, &w.be);
        if (rc != EXIT_OK) return rc;
        rc = simba_inspect_wait(w.be, o->name, &v, INSPECT_MS);
        if (rc != SIMBA_OK) {
            rc = inspect_failed(u, w.loop, "watch", rc);
            simba_loop_free(w.loop);
            return rc;
        }
        if (!printed || strcmp(v.owner, last) != 0 || v.fence != last_fence)
            watch_line(&w, v.owner[0] ? v.owner : NULL, v.fence, known(v.ttl_left_ms) ? v.ttl_left_ms : 0, wall_ms(), v.value, v.value_len);
        snprintf(last, sizeof last, "%s", v.owner);
        last_fence = v.fence;
        printed = 1;
        simba_loop_free(w.loop);
        p.fd = sigpipe_fd[0];
        p.events = POLLIN;
        poll(&p, 1, (int)(o->refresh_ms > 0 ? o->refresh_ms : 1000));
        while ((sig = next_signal()) != 0)
            if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT) return EXIT_OK;
    }
}

/* Polls until INT, TERM, HUP or QUIT. */
static int watch_loop(watcher *w) {
    for (;;) {
        int64_t d = simba_poll(w->loop);
        int sig, quit = 0;
        if (d < 0) { errorf("poll: %s", simba_strerror((int)d)); return EXIT_SOFTWARE; }
        while ((sig = next_signal()) != 0)
            if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT) quit = 1;
        if (quit) return EXIT_OK;
        if (w->denied) return EXIT_NOPERM;
        if (wait_io(w->loop, d)) return EXIT_OK;
    }
}

static int cmd_watch(const url_t *u, opts_t *o) {
    watcher w;
    simba_observe_desc od;
    simba_service *svc;
    int rc;
    if (setup_signals(0)) return EXIT_OSERR;
    if (u->kind == BE_SQLITE && access(u->path, F_OK) == 0 && !sqlite_writable(u->path)) return watch_by_reads(u, o);
    memset(&w, 0, sizeof w);
    w.o = o;
    rc = open_lib(u, o->ttl_ms, o->transition_ms, 0, &w.loop, &w.be);
    if (rc != EXIT_OK) return rc;
    memset(&od, 0, sizeof od);
    od.mutex = o->name;
    od.on_owner = on_watch;
    od.refresh_ms = o->refresh_ms;
    od.user_data = &w;
    rc = simba_observe(w.loop, w.be, &od, &svc);
    if (rc == SIMBA_OK) rc = simba_start(svc);
    if (rc == SIMBA_OK && simba_inspect(w.be, o->name, &w.view, on_watch_first, &w) == SIMBA_OK) w.asking = 1;
    if (rc != SIMBA_OK) {
        errorf("observe %s: %s (%s)", o->name, simba_loop_errmsg(w.loop), simba_strerror(rc));
        simba_loop_free(w.loop);
        return EXIT_SOFTWARE;
    }
    rc = watch_loop(&w);
    simba_loop_free(w.loop);
    return rc;
}

/* ---- get / ls / release: the library's inspection ------------------------------------------ */

/* A backend for inspection: SQLite read-only unless it writes (release), and the file must
   exist (inspection creates nothing). */
static int open_inspect(const url_t *u, const opts_t *o, int write, simba_loop **loop, simba_backend **be) {
    int rc;
    *loop = NULL;
    if (u->kind == BE_SQLITE && access(u->path, F_OK) != 0) { errorf("sqlite:%s: no such database file", u->path); return EXIT_BACKEND; }
    rc = open_lib(u, o->ttl_ms, o->transition_ms, !write, loop, be);
    if (rc != EXIT_OK && *loop) { simba_loop_free(*loop); *loop = NULL; }
    return rc;
}

/* An inspection that failed: bad input is a usage error, anything else the backend's. */
static int inspect_failed(const url_t *u, simba_loop *loop, const char *what, int rc) {
    char id[600];
    backend_id(u, id, sizeof id);
    errorf("%s: %s: %s (%s)", id, what, simba_loop_errmsg(loop), simba_strerror(rc));
    return rc == SIMBA_EINVAL ? EXIT_USAGE : rc == SIMBA_EDENIED ? EXIT_NOPERM : EXIT_BACKEND;
}


/* The members of get's JSON object, without its braces. */
static void print_view_members(const simba_view *v) {
    char ts[40] = "";
    int i;
    if (known(v->acquired_unix_ms) && v->owner[0]) iso_time(v->acquired_unix_ms, ts, sizeof ts);
    printf("\"mutex\":");
    json_str(stdout, v->mutex);
    printf(",\"owner\":");
    if (v->owner[0]) json_str(stdout, v->owner); else printf("null");
    printf(",\"fence\":%llu", (unsigned long long)v->fence);
    if (ts[0] && known(v->held_ms)) printf(",\"acquired\":\"%s\",\"held_ms\":%lld", ts, (long long)v->held_ms);
    else printf(",\"acquired\":null,\"held_ms\":null");
    if (v->owner[0] && known(v->ttl_left_ms)) printf(",\"ttl_left_ms\":%lld,\"transition_left_ms\":%lld", (long long)v->ttl_left_ms, (long long)v->transition_left_ms);
    else printf(",\"ttl_left_ms\":null,\"transition_left_ms\":null");
    if (v->owner[0] && known(v->lease_ms)) printf(",\"session_timeout_ms\":%lld", (long long)v->lease_ms);
    if (v->holders > 1 || (v->holders == 1 && v->holder && v->holder[0].shared) || v->permits > 1) {
        printf(",\"permits\":%d,\"holders\":[", v->permits);
        for (i = 0; i < v->holders && v->holder; i++) {
            const simba_view_holder *h = &v->holder[i];
            printf("%s{\"id\":", i ? "," : "");
            json_str(stdout, h->id);
            printf(",\"fence\":%llu,\"shared\":%s", (unsigned long long)h->fence, h->shared ? "true" : "false");
            if (known(h->held_ms)) printf(",\"held_ms\":%lld", (long long)h->held_ms);
            if (known(h->ttl_left_ms)) printf(",\"ttl_left_ms\":%lld,\"transition_left_ms\":%lld", (long long)h->ttl_left_ms, (long long)h->transition_left_ms);
            printf("}");
        }
        printf("]");
    }
    printf(",");
    json_value(stdout, v->value, v->value_len, v->owner[0] != 0);
    if (v->waiters >= 0) {
        printf(",\"waiters\":%d,\"next\":[", v->waiters);
        for (i = 0; i < v->waiters && i < SIMBA_VIEW_WAITERS; i++) {
            if (i) printf(",");
            json_str(stdout, v->waiter[i]);
        }
        printf("]");
    }
}

static void print_view(const simba_view *v, int json, int with_name_col) {
    char ts[40] = "";
    int i;
    if (known(v->acquired_unix_ms) && v->owner[0]) iso_time(v->acquired_unix_ms, ts, sizeof ts);
    if (json) {
        printf("{");
        print_view_members(v);
        printf("}");
        return;
    }
    if (with_name_col) {
        char who[SIMBA_ID_MAX + 16];
        /* a name with several holders: the one that frees first, and how many more */
        if (v->holders > 1) snprintf(who, sizeof who, "%s+%d", v->owner, v->holders - 1);
        else snprintf(who, sizeof who, "%s", v->owner[0] ? v->owner : "-");
        printf("%-24s %-40s %20llu %s\n", v->mutex, who, (unsigned long long)v->fence, ts[0] ? ts : "-");
        return;
    }
    printf("mutex: %s\n", v->mutex);
    printf("owner: %s\n", v->owner[0] ? v->owner : "-");
    printf("fence: %llu\n", (unsigned long long)v->fence);
    if (v->owner[0]) {
        printf("value: ");
        text_value(stdout, v->value, v->value_len);
        printf("\n");
        if (ts[0] && known(v->held_ms)) printf("acquired: %s (held %lld ms)\n", ts, (long long)v->held_ms);
        else printf("acquired: unknown\n");
        if (known(v->ttl_left_ms)) {
            printf("ttl_left_ms: %lld\n", (long long)v->ttl_left_ms);
            printf("transition_left_ms: %lld\n", (long long)v->transition_left_ms);
        } else if (known(v->lease_ms)) {
            printf("lease: the owner's ZooKeeper session (timeout %lld ms)\n", (long long)v->lease_ms);
        }
    }
    if (v->holders > 1 || (v->holders == 1 && v->holder && v->holder[0].shared) || v->permits > 1) {
        if (v->permits > 1) printf("holders: %d of %d permits\n", v->holders, v->permits);
        else printf("holders: %d\n", v->holders);
        for (i = 0; i < v->holders && v->holder; i++) {
            const simba_view_holder *h = &v->holder[i];
            printf("  %s fence %llu%s", h->id, (unsigned long long)h->fence, h->shared ? " reader" : "");
            if (known(h->held_ms)) printf(" held %lld ms", (long long)h->held_ms);
            if (known(h->ttl_left_ms)) printf(" ttl_left_ms %lld transition_left_ms %lld", (long long)h->ttl_left_ms, (long long)h->transition_left_ms);
            printf("\n");
        }
    }
    if (v->waiters > 0) {
        printf("waiters: %d (", v->waiters);
        for (i = 0; i < v->waiters && i < SIMBA_VIEW_WAITERS; i++) printf("%s%s", i ? ", " : "", v->waiter[i]);
        printf("%s)\n", v->waiters > SIMBA_VIEW_WAITERS ? ", ..." : "");
    }
}

/* ---- get: statistics from a holder's socket ------------------------------------------------ */

typedef struct stats_kv { char key[40]; char val[200]; } stats_kv;
typedef struct stats_reply {
    const char *path;
    int n;
    stats_kv kv[64];
} stats_reply;

static const char *kv_get(const stats_reply *sr, const char *key) {
    int i;
    for (i = 0; i < sr->n; i++)
        if (strcmp(sr->kv[i].key, key) == 0) return sr->kv[i].val;
    return NULL;
}

/* Reads the reply of the socket at path (2 s at most: a stopped holder must not hang get).
   0 on success, else -1 with the reason in why. */
static int stats_fetch(const char *path, stats_reply *sr, char *why, size_t cap) {
    struct sockaddr_un sa;
    char buf[8192], *line, *save = NULL;
    size_t len = 0;
    int fd;
    int64_t end = mono_ms() + 2000;
    memset(sr, 0, sizeof *sr);
    sr->path = path;
    if (strlen(path) >= sizeof sa.sun_path) { snprintf(why, cap, "the path is too long for a socket"); return -1; }
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) { snprintf(why, cap, "%s", strerror(errno)); return -1; }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); /* a full backlog (holder stopped) must not hang get */
    if (connect(fd, (struct sockaddr *)(void *)&sa, sizeof sa) != 0) {
        snprintf(why, cap, "%s", errno == EAGAIN ? "the holder does not accept (stopped or overloaded)" : strerror(errno));
        close(fd);
        return -1;
    }
    if (send(fd, "stats\n", 6, MSG_NOSIGNAL) != 6) { /* else the holder answers after STATS_REQ_MS */
        snprintf(why, cap, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    for (;;) {
        struct pollfd p;
        ssize_t r;
        int64_t left = end - mono_ms();
        p.fd = fd;
        p.events = POLLIN;
        p.revents = 0;
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) { snprintf(why, cap, "no answer within 2 s"); close(fd); return -1; }
        r = read(fd, buf + len, sizeof buf - 1 - len);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r < 0) { snprintf(why, cap, "%s", strerror(errno)); close(fd); return -1; }
        if (r == 0 || (len += (size_t)r) == sizeof buf - 1) break;
    }
    close(fd);
    buf[len] = 0;
    line = strtok_r(buf, "\n", &save);
    if (!line || strcmp(line, STATS_HEADER) != 0) { snprintf(why, cap, "not a simba statistics socket (no '%s' header)", STATS_HEADER); return -1; }
    while ((line = strtok_r(NULL, "\n", &save)) != NULL && sr->n < (int)(sizeof sr->kv / sizeof sr->kv[0])) {
        const char *sp = strchr(line, ' ');
        size_t kn = sp ? (size_t)(sp - line) : strlen(line), i;
        if (kn == 0 || kn >= sizeof sr->kv[0].key) continue;
        for (i = 0; i < kn; i++)
            if (!(islower((unsigned char)line[i]) || line[i] == '_' || line[i] == '.' || isdigit((unsigned char)line[i]))) break;
        if (i < kn) continue; /* keys are [a-z0-9_.]: anything else is not ours */
        memcpy(sr->kv[sr->n].key, line, kn);
        sr->kv[sr->n].key[kn] = 0;
        snprintf(sr->kv[sr->n].val, sizeof sr->kv[0].val, "%s", sp ? sp + 1 : "");
        sr->n++;
    }
    if (!kv_get(sr, "mutex") || !kv_get(sr, "backend")) { snprintf(why, cap, "the reply names no mutex or backend"); return -1; }
    return 0;
}

/* Which statistics get shows: --stats SOCKET (a mismatch is an error) or $SIMBA_STATS_SOCKET
   (used only when it speaks of NAME on this backend: the command may look at other mutexes).
   Returns 1 with *sr filled, 0 for none, or -exit status. */
static int stats_for_get(const url_t *u, const opts_t *o, stats_reply *sr) {
    const char *path = o->stats_sock, *env = getenv("SIMBA_STATS_SOCKET");
    char why[256], me[4400];
    int explicit_ = path != NULL;
    if (!path) path = env && *env ? env : NULL;
    if (!path) return 0;
    if (stats_fetch(path, sr, why, sizeof why) != 0) {
        if (explicit_) { errorf("--stats %s: %s", path, why); return -EXIT_BACKEND; }
        errorf("SIMBA_STATS_SOCKET=%s: %s: statistics left out", path, why);
        return 0;
    }
    if (strcmp(kv_get(sr, "mutex"), o->name) != 0) {
        if (!explicit_) return 0;
        errorf("--stats %s: that socket belongs to mutex '%s', not '%s'", path, kv_get(sr, "mutex"), o->name);
        return -EXIT_USAGE;
    }
    backend_id(u, me, sizeof me);
    if (strcmp(kv_get(sr, "backend"), me) != 0) {
        if (!explicit_) return 0;
        errorf("--stats %s: that socket holds '%s' on %s, not on %s", path, o->name, kv_get(sr, "backend"), me);
        return -EXIT_USAGE;
    }
    return 1;
}

static int is_int(const char *s) {
    if (*s == '-') s++;
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

/* The reply as a JSON object: numbers as numbers, owner as a boolean, release.<reason>
   gathered in "releases_by_reason". Keys the server adds later pass through. */
static void stats_print_json(const stats_reply *sr) {
    int i, rel_done = 0;
    printf("{\"socket\":");
    json_str(stdout, sr->path);
    for (i = 0; i < sr->n; i++) {
        const stats_kv *kv = &sr->kv[i];
        if (strncmp(kv->key, "release.", 8) == 0) {
            int j;
            if (rel_done) continue;
            rel_done = 1;
            printf(",\"releases_by_reason\":{");
            for (j = i; j < sr->n; j++) {
                if (strncmp(sr->kv[j].key, "release.", 8) != 0) continue;
                printf("%s", j == i ? "" : ",");
                json_str(stdout, sr->kv[j].key + 8);
                printf(":%s", is_int(sr->kv[j].val) ? sr->kv[j].val : "null");
            }
            printf("}");
            continue;
        }
        printf(",\"%s\":", kv->key);
        if (strcmp(kv->key, "owner") == 0) printf("%s", strcmp(kv->val, "1") == 0 ? "true" : "false");
        else if (is_int(kv->val) && strcmp(kv->key, "contender") != 0 && strcmp(kv->key, "mutex") != 0 && strcmp(kv->key, "last_error_msg") != 0) printf("%s", kv->val);
        else json_str(stdout, kv->val);
    }
    printf("}");
}

static void stats_print_text(const stats_reply *sr) {
    int i, rel_done = 0;
    const char *pid = kv_get(sr, "pid");
    printf("stats: from simba pid %s (socket %s)\n", pid ? pid : "?", sr->path);
    for (i = 0; i < sr->n; i++) {
        const stats_kv *kv = &sr->kv[i];
        if (!strcmp(kv->key, "mutex") || !strcmp(kv->key, "pid")) continue;
        if (strncmp(kv->key, "release.", 8) == 0) {
            int j;
            if (rel_done) continue;
            rel_done = 1;
            printf("  releases_by_reason:");
            for (j = i; j < sr->n; j++)
                if (strncmp(sr->kv[j].key, "release.", 8) == 0) printf(" %s %s", sr->kv[j].key + 8, sr->kv[j].val);
            printf("\n");
            continue;
        }
        if (!strcmp(kv->key, "owner")) printf("  owner: %s\n", strcmp(kv->val, "1") == 0 ? "yes" : "no");
        else printf("  %s: %s\n", kv->key, kv->val);
    }
}

static int cmd_get(const url_t *u, opts_t *o) {
    simba_loop *loop;
    simba_backend *be;
    simba_view v;
    stats_reply *sr;
    int64_t max_lease;
    int rc = open_inspect(u, o, 0, &loop, &be), have;
    if (rc != EXIT_OK) return rc;
    rc = simba_inspect_wait(be, o->name, &v, INSPECT_MS);
    if (rc != SIMBA_OK) {
        rc = inspect_failed(u, loop, "get", rc);
        simba_loop_free(loop);
        return rc;
    }
    /* the bound this backend enforces (Redis: the one every process on the prefix agreed on) */
    max_lease = simba_backend_max_lease(be);
    /* the loop holds the view's value and holders: it is freed once they are printed */
    sr = (stats_reply *)calloc(1, sizeof *sr);
    if (!sr) { errorf("out of memory"); simba_loop_free(loop); return EXIT_OSERR; }
    have = stats_for_get(u, o, sr);
    if (have < 0) { free(sr); simba_loop_free(loop); return -have; }
    if (o->json) {
        printf("{");
        print_view_members(&v);
        if (max_lease > 0) printf(",\"max_lease_ms\":%lld", (long long)max_lease);
        else printf(",\"max_lease_ms\":null");
        if (have) {
            printf(",\"stats\":");
            stats_print_json(sr);
        }
        printf("}\n");
    } else {
        print_view(&v, 0, 0);
        if (max_lease > 0) printf("max_lease_ms: %lld\n", (long long)max_lease);
        if (have) stats_print_text(sr);
    }
    free(sr);
    simba_loop_free(loop);
    return v.owner[0] ? EXIT_OK : EXIT_NO;
}

/* ---- yield: ask the local holder to hand over ---------------------------------------------- */

/* Asks the holder behind the socket at path to yield and waits up to wait_ms for the outcome:
   result (passed kept failed lost not-owner busy), fence and message from its answer. 0, or -1
   with the reason in why. A holder too busy to hear it answers with its statistics: the
   request is sent again. */
static int yield_send(const char *path, int64_t wait_ms, char *result, size_t rcap, char *fence, size_t fcap, char *msg, size_t mcap,
                      char *why, size_t wcap) {
    int attempt;
    for (attempt = 0; attempt < 20; attempt++) {
        struct sockaddr_un sa;
        char buf[2048], *line, *save = NULL;
        size_t len = 0;
        int fd;
        int64_t end = mono_ms() + wait_ms;
        if (strlen(path) >= sizeof sa.sun_path) { snprintf(why, wcap, "the path is too long for a socket"); return -1; }
        memset(&sa, 0, sizeof sa);
        sa.sun_family = AF_UNIX;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0) { snprintf(why, wcap, "%s", strerror(errno)); return -1; }
        if (connect(fd, (struct sockaddr *)(void *)&sa, sizeof sa) != 0 || send(fd, "yield\n", 6, MSG_NOSIGNAL) != 6) {
            if (errno == EPIPE || errno == ECONNRESET) { close(fd); continue; } /* answered with statistics already */
            snprintf(why, wcap, "%s", strerror(errno));
            close(fd);
            return -1;
        }
        for (;;) {
            struct pollfd p;
            ssize_t r;
            int64_t left = end - mono_ms();
            p.fd = fd;
            p.events = POLLIN;
            p.revents = 0;
            if (left <= 0 || poll(&p, 1, (int)(left > 60000 ? 60000 : left)) == 0) {
                snprintf(why, wcap, "no answer within %.3g s", (double)wait_ms / 1000.0);
                close(fd);
                return -1;
            }
            r = read(fd, buf + len, sizeof buf - 1 - len);
            if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (r <= 0 || (len += (size_t)r) == sizeof buf - 1) break;
        }
        close(fd);
        buf[len] = 0;
        line = strtok_r(buf, "\n", &save);
        if (line && strcmp(line, STATS_HEADER) == 0) { /* its queue of clients was full */
            struct timespec ts = {0, 50000000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (!line || strcmp(line, YIELD_HEADER) != 0) { snprintf(why, wcap, "no '%s' answer (not a simba of this version?)", YIELD_HEADER); return -1; }
        result[0] = fence[0] = msg[0] = 0;
        while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
            if (strncmp(line, "result ", 7) == 0) snprintf(result, rcap, "%s", line + 7);
            else if (strncmp(line, "fence ", 6) == 0) snprintf(fence, fcap, "%s", line + 6);
            else if (strncmp(line, "message ", 8) == 0) snprintf(msg, mcap, "%s", line + 8);
        }
        if (!result[0]) { snprintf(why, wcap, "the answer has no result"); return -1; }
        return 0;
    }
    snprintf(why, wcap, "the holder answered with its statistics %d times: it never read the request", attempt);
    return -1;
}

/* The statistics sockets of this user's run/elect processes on this host (DIR/simba-*\/
   stats.sock under $XDG_RUNTIME_DIR, $TMPDIR and /tmp, where stats_open makes them): the
   path of the one that owns NAME on this backend. 1 found, 0 not (*waiting: how many others
   serve NAME there, waiting for it). */
static int find_holder(const url_t *u, const opts_t *o, char *out, size_t cap, int *waiting) {
    const char *base[3];
    char seen[3][4096], me[4400];
    int i, j, nseen = 0;
    backend_id(u, me, sizeof me);
    base[0] = getenv("XDG_RUNTIME_DIR");
    base[1] = getenv("TMPDIR");
    base[2] = "/tmp";
    *waiting = 0;
    for (i = 0; i < 3; i++) {
        DIR *d;
        struct dirent *e;
        char *rp;
        if (!base[i] || base[i][0] != '/' || !(rp = realpath(base[i], NULL))) continue;
        for (j = 0; j < nseen && strcmp(seen[j], rp) != 0; j++) {}
        if (j < nseen || strlen(rp) >= sizeof seen[0]) { free(rp); continue; }
        snprintf(seen[nseen++], sizeof seen[0], "%s", rp);
        free(rp);
        if (!(d = opendir(seen[nseen - 1]))) continue;
        while ((e = readdir(d)) != NULL) {
            char path[sizeof stats_path + 4096], why[256];
            struct stat st;
            stats_reply *sr;
            const char *own;
            if (strncmp(e->d_name, "simba-", 6) != 0 || strlen(e->d_name) != 12) continue; /* mkdtemp's simba-XXXXXX */
            snprintf(path, sizeof path, "%s/%s/stats.sock", seen[nseen - 1], e->d_name);
            if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) continue;
            if (!(sr = (stats_reply *)calloc(1, sizeof *sr))) continue;
            if (stats_fetch(path, sr, why, sizeof why) == 0 && strcmp(kv_get(sr, "mutex"), o->name) == 0 &&
                strcmp(kv_get(sr, "backend"), me) == 0) {
                own = kv_get(sr, "owner");
                if (own && strcmp(own, "1") == 0 && strlen(path) < cap) {
                    snprintf(out, cap, "%s", path);
                    free(sr);
                    closedir(d);
                    return 1;
                }
                ++*waiting;
            }
            free(sr);
        }
        closedir(d);
    }
    return 0;
}

/* Asks the simba run/elect of this host that holds NAME to yield (--stats SOCKET: that one):
   0 passed on, 1 kept or not held here, 69 no answer or the store failed. */
static int cmd_yield(const url_t *u, opts_t *o) {
    char path[sizeof stats_path + 4096], result[32], fence[32], msg[600], why[300], me[4400];
    int waiting = 0;
    backend_id(u, me, sizeof me);
    if (o->stats_sock) {
        stats_reply *sr = (stats_reply *)calloc(1, sizeof *sr);
        int rc = EXIT_OK;
        if (!sr) { errorf("out of memory"); return EXIT_OSERR; }
        if (stats_fetch(o->stats_sock, sr, why, sizeof why) != 0) { errorf("--stats %s: %s", o->stats_sock, why); rc = EXIT_BACKEND; }
        else if (strcmp(kv_get(sr, "mutex"), o->name) != 0 || strcmp(kv_get(sr, "backend"), me) != 0) {
            errorf("--stats %s: that socket serves '%s' on %s, not '%s' on %s", o->stats_sock, kv_get(sr, "mutex"), kv_get(sr, "backend"), o->name, me);
            rc = EXIT_USAGE;
        }
        free(sr);
        if (rc != EXIT_OK) return rc;
        snprintf(path, sizeof path, "%s", o->stats_sock);
    } else if (!find_holder(u, o, path, sizeof path, &waiting)) {
        errorf("yield: no simba run or elect of this user on this host holds %s on %s%s", o->name, me,
               waiting ? " (some wait for it)" : "");
        return EXIT_NO;
    }
    if (yield_send(path, 60000, result, sizeof result, fence, sizeof fence, msg, sizeof msg, why, sizeof why) != 0) {
        errorf("yield %s: %s: %s", o->name, path, why);
        return EXIT_BACKEND;
    }
    if (strcmp(result, "passed") == 0) {
        printf("yielded %s (fence %s): passed to the oldest waiter\n", o->name, fence);
        return EXIT_OK;
    }
    if (strcmp(result, "kept") == 0) {
        printf("kept %s (fence %s): nobody waits, the holder leads on\n", o->name, fence);
        return EXIT_NO;
    }
    errorf("yield %s: %s%s%s", o->name, result, msg[0] ? ": " : "", msg);
    return strcmp(result, "failed") == 0 || strcmp(result, "busy") == 0 ? EXIT_BACKEND : EXIT_NO;
}

/* ---- ls ---------------------------------------------------------------------------------------- */

typedef struct lister { int json, n; } lister;

static void on_listed(const simba_view *v, simba_result rc, void *u) {
    lister *ls = (lister *)u;
    if (!v || rc != SIMBA_OK) return;
    if (ls->json) { if (ls->n) printf(","); print_view(v, 1, 0); }
    else print_view(v, 0, 1);
    ls->n++;
}

static int cmd_ls(const url_t *u, opts_t *o) {
    simba_loop *loop;
    simba_backend *be;
    lister ls;
    int rc = open_inspect(u, o, 0, &loop, &be), ret = EXIT_OK;
    if (rc != EXIT_OK) return rc;
    ls.json = o->json;
    ls.n = 0;
    if (o->json) printf("[");
    else printf("%-24s %-40s %20s %s\n", "MUTEX", "OWNER", "FENCE", "ACQUIRED");
    rc = simba_list_wait(be, on_listed, &ls, INSPECT_MS);
    if (o->json) printf("]\n");
    fflush(stdout);
    if (rc != SIMBA_OK) ret = inspect_failed(u, loop, "ls", rc);
    simba_loop_free(loop);
    return ret;
}

/* ---- checkpoint ----------------------------------------------------------------------------- */

/* SQLite only: the checkpoints a loop opened with checkpoint = -1 leaves to someone else.
   A busy checkpoint (another one running) is not an error: the next one copies the rest. */
static int cmd_checkpoint(const url_t *u, opts_t *o) {
    char err[600];
    int frames, copied, sig = 0;
    if (u->kind != BE_SQLITE) { errorf("checkpoint: for SQLite only (sqlite:PATH); the other backends have no WAL of ours"); return EXIT_USAGE; }
    if (o->every_ms > 0 && setup_signals(0)) return EXIT_OSERR;
    for (;;) {
        simba_result rc = simba_sql_checkpoint(u->path, &frames, &copied, err, sizeof err);
        if (rc == SIMBA_EINVAL) { errorf("checkpoint: %s", err); return EXIT_USAGE; }
        if (rc == SIMBA_EBACKEND) { errorf("checkpoint: %s", err); return EXIT_BACKEND; }
        if (o->verbose || !o->every_ms) {
            if (rc == SIMBA_EBUSY) printf("busy: another checkpoint runs\n");
            else if (frames < 0) printf("not in WAL mode: nothing to copy\n");
            else printf("%d of %d WAL frames in the database\n", copied, frames);
            fflush(stdout);
        }
        if (!o->every_ms) return EXIT_OK;
        {
            struct pollfd p;
            p.fd = sigpipe_fd[0];
            p.events = POLLIN;
            if (poll(&p, 1, (int)(o->every_ms > 86400000 ? 86400000 : o->every_ms)) > 0 && (sig = next_signal()) != 0) break;
        }
    }
    return sig == SIGINT || sig == SIGTERM ? EXIT_OK : 128 + sig;
}

/* ---- release --fence ------------------------------------------------------------------------ */

/* Clears the owner only if it still holds the fence, atomically in the store, and wakes the
   head waiter as a release does (simba_force_release). */
static int cmd_release(const url_t *u, opts_t *o) {
    simba_loop *loop;
    simba_backend *be;
    simba_view v;
    int rc;
    if (!o->have_fence) {
        errorf("release: --fence N is required (see `simba get %s`): a release without it could hit a newer owner", o->name);
        return EXIT_USAGE;
    }
    rc = open_inspect(u, o, 1, &loop, &be);
    if (rc != EXIT_OK) return rc;
    rc = simba_force_release_wait(be, o->name, o->fence, INSPECT_MS);
    if (rc == SIMBA_OK) {
        printf("released %s (fence %llu)\n", o->name, (unsigned long long)o->fence);
        simba_loop_free(loop);
        return EXIT_OK;
    }
    if (rc != SIMBA_EFENCE) {
        rc = inspect_failed(u, loop, "release", rc);
        simba_loop_free(loop);
        return rc;
    }
    if (simba_inspect_wait(be, o->name, &v, INSPECT_MS) == SIMBA_OK && v.owner[0])
        errorf("not released: %s is held by %s with fence %llu, not %llu", o->name, v.owner, (unsigned long long)v.fence, (unsigned long long)o->fence);
    else
        errorf("not released: nobody holds %s", o->name);
    simba_loop_free(loop);
    return EXIT_NO;
}

/* ---- main ---------------------------------------------------------------------------------------- */

/* ---- init: declare a new Redis server empty ------------------------------------------------- */

static int cmd_init(const url_t *u, opts_t *o) {
    simba_redis_desc d;
    char msg[512];
    int rc;
    if (u->kind != BE_REDIS) {
        errorf("init: for Redis only (redis://HOST[:PORT]): the other stores (SQLite, ZooKeeper, PostgreSQL, MySQL) keep their data "
               "durably and need no declaration");
        return EXIT_USAGE;
    }
    memset(&d, 0, sizeof d);
    d.host = u->host;
    d.port = u->port;
    d.password = getenv("SIMBA_REDIS_PASSWORD");
    d.username = getenv("SIMBA_REDIS_USERNAME");
    if (d.password && !*d.password) d.password = NULL;
    if (d.username && !*d.username) d.username = NULL;
    rc = simba_redis_declare_fresh(&d, o->force, msg, sizeof msg);
    if (rc == SIMBA_OK) { printf("redis://%s:%d: %s\n", u->host, u->port, msg); return EXIT_OK; }
    errorf("init redis://%s:%d: %s", u->host, u->port, msg);
    return rc == SIMBA_EEXIST ? EXIT_NO : rc == SIMBA_EINVAL ? EXIT_USAGE : EXIT_BACKEND;
}

/* Each option's command, checked once NAME and the options are read. */
static int check_opts_for(const char *cmd, const opts_t *o) {
    int run = !strcmp(cmd, "run") || !strcmp(cmd, "elect");
    if (o->force && strcmp(cmd, "init")) { errorf("%s: --force is for init", cmd); return -1; }
    if (o->every_ms && strcmp(cmd, "checkpoint")) { errorf("%s: --every is for checkpoint", cmd); return -1; }
    if (o->have_connect && !run) { errorf("%s: --connect-timeout is for run and elect", cmd); return -1; }
    if (o->have_fence && strcmp(cmd, "release") != 0) { errorf("%s: --fence is for release", cmd); return -1; }
    if ((o->permits || o->shared) && !run) { errorf("%s: --permits and --shared are for run and elect", cmd); return -1; }
    if ((o->stats_file || o->no_stats_socket) && !run) { errorf("%s: --stats-file and --no-stats-socket are for run and elect", cmd); return -1; }
    if (o->stats_sock && strcmp(cmd, "get") && strcmp(cmd, "yield")) { errorf("%s: --stats is for get and yield", cmd); return -1; }
    if (o->have_value && !run) { errorf("%s: --value is for run and elect", cmd); return -1; }
    if (o->yield_sig && strcmp(cmd, "elect")) { errorf("%s: --yield-on is for elect", cmd); return -1; }
    return 0;
}

/* run and elect: the command after --, -n / -w, and a grace shorter than the window. */
static int check_run_opts(const char *cmd, opts_t *o, const url_t *u) {
    int64_t window;
    if (!o->cmd) { errorf("%s: missing the command: simba %s NAME -- CMD [ARG...]", cmd, cmd); return -1; }
    if (o->nonblock && o->have_wait) { errorf("%s: -n and -w exclude each other", cmd); return -1; }
    if (o->have_wait && o->wait_ms == 0) { o->nonblock = 1; o->have_wait = 0; } /* as flock -w 0 */
    if (o->once && strcmp(cmd, "elect")) { errorf("run: --once is for elect"); return -1; }
    if (o->shared && o->permits > 1) { errorf("%s: --shared with --permits %d: a reader holds a read-write lock, not a semaphore", cmd, o->permits); return -1; }
    if (!o->have_grace) o->grace_ms = o->transition_ms / 2;
    window = u->kind == BE_ZK ? (o->ttl_ms + o->transition_ms) / 3 : o->transition_ms;
    if (o->grace_ms > 0 && o->grace_ms >= window) {
        errorf("--grace %.3f s must be shorter than the transition window (%.3f s): the command must be gone before another contender can win",
               (double)o->grace_ms / 1000.0, (double)window / 1000.0);
        return -1;
    }
    return 0;
}

/* --stats-file: said now, not after the command has run. */
static int check_stats_file(const char *file) {
    char dir[4096];
    const char *sl = strrchr(file, '/');
    if (strlen(file) >= sizeof dir - 32) { errorf("--stats-file: the path is too long"); return -1; }
    if (!sl) snprintf(dir, sizeof dir, ".");
    else if (sl == file) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(sl - file), file);
    if (sl && !sl[1]) { errorf("--stats-file '%s': names a directory, not a file", file); return -1; }
    if (access(dir, W_OK | X_OK) != 0) { errorf("--stats-file '%s': cannot write in directory '%s': %s", file, dir, strerror(errno)); return -1; }
    return 0;
}

static int cmd_run_lock(const url_t *u, opts_t *o) { return cmd_run(u, o, 0); }
static int cmd_elect(const url_t *u, opts_t *o) { return cmd_run(u, o, 1); }

/* The commands: NAME required (1) or refused (0). */
static const struct command_t {
    const char *name;
    int (*run)(const url_t *u, opts_t *o);
    int named;
} commands[] = {
    {"run", cmd_run_lock, 1},   {"elect", cmd_elect, 1}, {"yield", cmd_yield, 1},           {"get", cmd_get, 1},   {"watch", cmd_watch, 1},
    {"ls", cmd_ls, 0},          {"release", cmd_release, 1}, {"checkpoint", cmd_checkpoint, 0}, {"init", cmd_init, 0},
};

/* Options before the command: -h, --version, -u URL. Returns the index of the command, or
   -1 - the exit status. */
static int global_opts(int argc, char **argv, opts_t *o) {
    int i = 1;
    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) { usage(stdout); return -1 - EXIT_OK; }
        if (strcmp(argv[i], "--version") == 0) { printf("simba %s\n", SIMBA_VERSION); return -1 - EXIT_OK; }
        if ((strcmp(argv[i], "-u") == 0 || strcmp(argv[i], "--url") == 0) && i + 1 < argc) { o->url = argv[i + 1]; i += 2; continue; }
        if (strcmp(argv[i], "-u") == 0 || strcmp(argv[i], "--url") == 0) { errorf("-u: missing URL"); return -1 - EXIT_USAGE; }
        errorf("unknown option '%s' before the command (see simba --help)", argv[i]);
        return -1 - EXIT_USAGE;
    }
    if (i >= argc) { usage(stderr); return -1 - EXIT_USAGE; }
    return i;
}

int main(int argc, char **argv) {
    opts_t o;
    url_t u;
    const struct command_t *c = NULL;
    int i, j;
    size_t k;
    memset(&o, 0, sizeof o);
    o.sig = SIGTERM;
    o.ttl_ms = 10000;
    o.transition_ms = 6000;
    o.connect_ms = 30000;
    o.refresh_ms = 1000;
    o.url = getenv("SIMBA_URL");
    if ((i = global_opts(argc, argv, &o)) < 0) return -1 - i;
    if (strcmp(argv[i], "help") == 0) { usage(stdout); return EXIT_OK; }
    for (k = 0; k < sizeof commands / sizeof commands[0]; k++) if (strcmp(argv[i], commands[k].name) == 0) c = &commands[k];
    if (!c) {
        errorf("unknown command '%s' (run, elect, yield, get, watch, ls, release, checkpoint, init; see simba --help)", argv[i]);
        return EXIT_USAGE;
    }
    i++;
    for (j = i; j < argc && strcmp(argv[j], "--"); j++) /* help anywhere before the command */
        if (strcmp(argv[j], "-h") == 0 || strcmp(argv[j], "--help") == 0) { usage(stdout); return EXIT_OK; }
    if (parse_opts(c->name, argc - i, argv + i, &o)) return EXIT_USAGE;
    if (c->named && check_name(c->name, o.name)) return EXIT_USAGE;
    if (!c->named && o.name) { errorf("%s: unexpected argument '%s'", c->name, o.name); return EXIT_USAGE; }
    if (check_opts_for(c->name, &o)) return EXIT_USAGE;
    if (c->run != cmd_run_lock && c->run != cmd_elect && o.cmd) { errorf("%s: takes no command after --", c->name); return EXIT_USAGE; }
    if (parse_url(o.url, &u)) return EXIT_USAGE;
    if ((c->run == cmd_run_lock || c->run == cmd_elect) && check_run_opts(c->name, &o, &u)) return EXIT_USAGE;
    if (o.stats_file && check_stats_file(o.stats_file)) return EXIT_USAGE;
    if (u.kind == BE_REDIS && resolve_redis_host(&u)) return EXIT_USAGE;
    verbose_log = getenv("SIMBA_DEBUG") != NULL;
    return c->run(&u, &o);
}
