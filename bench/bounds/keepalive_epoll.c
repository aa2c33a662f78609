/* The least a keep-alive HTTP/1.1 client can do per request: one write and one read, epoll for readiness, no
 * parsing (nginx's "ok\n" answer arrives in one read), no timing, no histogram. bench/bounds.py holds its requests
 * per CPU-s against wrk's: how far above wrk any client can get on this machine's kernel.
 * usage: keepalive_epoll PORT CLIENTS SECONDS */
#define _GNU_SOURCE
#include "common.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char REQ[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

int main(int argc, char **argv) {
    struct bounds_args args = bounds_args(argc, argv);
    int ep = epoll_create1(0);
    long done = 0;
    for (int i = 0; i < args.clients; i++) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        struct sockaddr_in a = bounds_service(args.port);
        connect(s, (struct sockaddr *)&a, sizeof a); /* loopback: established within the call */
        struct epoll_event e = {.events = EPOLLIN, .data.fd = s};
        epoll_ctl(ep, EPOLL_CTL_ADD, s, &e);
        if (write(s, REQ, sizeof REQ - 1) < 0) {
            perror("write");
            return 1;
        }
    }
    bounds_start(&args);
    char buf[4096];
    struct epoll_event ev[BOUNDS_EVENTS];
    for (int k; (k = bounds_ready(&args, ep, ev)) >= 0;) {
        for (int i = 0; i < k; i++) {
            int s = ev[i].data.fd;
            bounds_read(s, buf, sizeof buf);
            done++;
            if (write(s, REQ, sizeof REQ - 1) < 0) {
                perror("write");
                return 1;
            }
        }
    }
    printf("requests %ld\n", done);
    return 0;
}
