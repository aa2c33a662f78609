/* The least a client making a new connection per request can do: a non-blocking socket, connect, the request
 * written at once (on loopback the handshake is done within connect), one read of the answer ("Connection: close":
 * the server closes first and keeps the TIME_WAIT, as with wrk and knee), close. bench/bounds.py holds its requests
 * per CPU-s against wrk's. usage: newconn_epoll PORT CLIENTS SECONDS */
#define _GNU_SOURCE
#include "common.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char REQ[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
static int port, ep;
static long waited; /* connections whose first write had to wait for the handshake */

static void start(void) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = bounds_service(port);
    connect(s, (struct sockaddr *)&a, sizeof a); /* EINPROGRESS */
    if (write(s, REQ, sizeof REQ - 1) < 0) {     /* not connected yet: write when writable */
        struct epoll_event e = {.events = EPOLLOUT, .data.u64 = (1ull << 32) | (unsigned)s};
        epoll_ctl(ep, EPOLL_CTL_ADD, s, &e);
        return;
    }
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = (unsigned)s};
    epoll_ctl(ep, EPOLL_CTL_ADD, s, &e);
}

int main(int argc, char **argv) {
    struct bounds_args args = bounds_args(argc, argv);
    port = args.port;
    ep = epoll_create1(0);
    long done = 0;
    for (int i = 0; i < args.clients; i++) start();
    bounds_start(&args);
    char buf[4096];
    struct epoll_event ev[BOUNDS_EVENTS];
    for (int k; (k = bounds_ready(&args, ep, ev)) >= 0;) {
        for (int i = 0; i < k; i++) {
            int s = (int)(ev[i].data.u64 & 0xffffffffu);
            if (ev[i].data.u64 >> 32) {
                waited++;
                if (write(s, REQ, sizeof REQ - 1) < 0) {
                    perror("write");
                    return 1;
                }
                struct epoll_event e = {.events = EPOLLIN, .data.u64 = (unsigned)s};
                epoll_ctl(ep, EPOLL_CTL_MOD, s, &e);
                continue;
            }
            if (read(s, buf, sizeof buf) > 0) done++;
            close(s);
            start();
        }
    }
    printf("requests %ld\nwaited %ld\n", done, waited);
    return 0;
}
