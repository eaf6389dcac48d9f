/* fault_proxy.c -- a loopback TCP forwarder that the fault harness puts between one worker
 * and its server, so that faults can hit that worker's connections alone.
 *
 *   fault_proxy TARGET_PORT PORT_FILE
 *
 * Listens on 127.0.0.1 (a port the kernel picks, written to PORT_FILE once listening) and
 * forwards every accepted connection to 127.0.0.1:TARGET_PORT.
 *   SIGSTOP / SIGCONT (sent by the harness)  a partition: TCP stays up, nothing passes
 *   SIGUSR1                                  every connection is closed at once (reset)
 *   SIGTERM / SIGINT                         exit
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXPAIRS 64

static volatile sig_atomic_t cut, quit;
static void on_usr1(int s) { (void)s; cut = 1; }
static void on_term(int s) { (void)s; quit = 1; }

static int pairs[MAXPAIRS][2]; /* client, server; -1 when free */

static void close_pair(int i) {
    close(pairs[i][0]);
    close(pairs[i][1]);
    pairs[i][0] = pairs[i][1] = -1;
}

/* Copies what is readable on from to to; 0 when the connection should end. */
static int pump(int from, int to) {
    char buf[65536];
    ssize_t n = read(from, buf, sizeof buf), off = 0;
    if (n <= 0) return n < 0 && errno == EINTR;
    while (off < n) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w < 0) {
            if (errno == EINTR) continue;
            return 0;
        }
        off += w;
    }
    return 1;
}

int main(int argc, char **argv) {
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    int lfd, target, i, one = 1;
    struct sigaction sa;
    FILE *pf;
    if (argc != 3 || (target = atoi(argv[1])) <= 0 || target > 65535) {
        fprintf(stderr, "usage: fault_proxy TARGET_PORT PORT_FILE\n");
        return 2;
    }
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    for (i = 0; i < MAXPAIRS; i++) pairs[i][0] = pairs[i][1] = -1;

    lfd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 16) < 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) < 0) {
        perror("fault_proxy: listen");
        return 1;
    }
    pf = fopen(argv[2], "w");
    if (!pf) {
        perror(argv[2]);
        return 1;
    }
    fprintf(pf, "%d\n", ntohs(a.sin_port));
    fclose(pf);

    while (!quit) {
        struct pollfd p[1 + 2 * MAXPAIRS];
        int n = 1, k;
        if (cut) {
            cut = 0;
            for (i = 0; i < MAXPAIRS; i++)
                if (pairs[i][0] >= 0) close_pair(i);
        }
        p[0].fd = lfd;
        p[0].events = POLLIN;
        for (i = 0; i < MAXPAIRS; i++) {
            p[n].fd = pairs[i][0];
            p[n].events = POLLIN;
            p[n + 1].fd = pairs[i][1];
            p[n + 1].events = POLLIN;
            n += 2; /* fd -1 is ignored by poll */
        }
        if (poll(p, (nfds_t)n, 200) <= 0) continue;
        if (p[0].revents & POLLIN) {
            int c = accept(lfd, NULL, NULL), s;
            if (c >= 0) {
                struct sockaddr_in t;
                memset(&t, 0, sizeof t);
                t.sin_family = AF_INET;
                t.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                t.sin_port = htons((unsigned short)target);
                s = socket(AF_INET, SOCK_STREAM, 0);
                for (k = 0; k < MAXPAIRS && pairs[k][0] >= 0; k++) {
                }
                if (s < 0 || k == MAXPAIRS || connect(s, (struct sockaddr *)&t, sizeof t) < 0) {
                    if (s >= 0) close(s);
                    close(c);
                } else {
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    pairs[k][0] = c;
                    pairs[k][1] = s;
                }
            }
        }
        for (i = 0, k = 1; i < MAXPAIRS; i++, k += 2) {
            if (pairs[i][0] < 0) continue;
            if ((p[k].revents && !pump(pairs[i][0], pairs[i][1])) ||
                (p[k + 1].revents && !pump(pairs[i][1], pairs[i][0])))
                close_pair(i);
        }
    }
    for (i = 0; i < MAXPAIRS; i++)
        if (pairs[i][0] >= 0) close_pair(i);
    close(lfd);
    return 0;
}
