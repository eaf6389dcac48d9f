/* zk_probe.h -- is a ZooKeeper server on 127.0.0.1:port serving? The four-letter word
   "srvr" answers with a "Mode:" line once it is (ruok answers earlier than that). Test
   side only: a blocking socket with a 2 s receive timeout. */
#ifndef SIMBA_ZK_PROBE_H
#define SIMBA_ZK_PROBE_H
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int zk_serving(int port) {
    struct sockaddr_in a;
    char buf[2048];
    size_t got = 0;
    ssize_t n;
    struct timeval tv = {2, 0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || write(fd, "srvr", 4) != 4) {
        close(fd);
        return 0;
    }
    while (got < sizeof buf - 1 && (n = read(fd, buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)n;
    buf[got] = 0;
    close(fd);
    return strstr(buf, "Mode:") != NULL;
}
#endif
