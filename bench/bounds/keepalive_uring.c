/* keepalive_epoll.c's client on io_uring, as knee would use it: one multishot receive per connection into a ring
 * of provided buffers (armed once, never re-armed), each answer's next request queued as a send whose success
 * makes no completion, all of a loop's submissions in one io_uring_enter; DEFER_TASKRUN (the completions run when
 * the loop waits). bench/bounds.py holds it against keepalive_epoll and wrk: what io_uring could win here.
 * usage: keepalive_uring PORT CLIENTS SECONDS */
#define _GNU_SOURCE
#include "common.h"
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUFFERS 16384 /* a power of two; more than the answers that can wait at once */
#define BUFFER_SIZE 512
#define SEND_TAG (1ull << 32)

static const char REQ[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
static char pool[BUFFERS][BUFFER_SIZE];

/* A free submission entry: when the queue is full, what it holds is submitted first. */
static struct io_uring_sqe *entry(struct io_uring *ring) {
    struct io_uring_sqe *q = io_uring_get_sqe(ring);
    if (q == NULL) {
        io_uring_submit(ring);
        q = io_uring_get_sqe(ring);
    }
    return q;
}

static void queue_send(struct io_uring *ring, int fd, int i) {
    struct io_uring_sqe *q = entry(ring);
    io_uring_prep_send(q, fd, REQ, sizeof REQ - 1, 0);
    q->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(q, SEND_TAG | (unsigned)i);
}

static void queue_receive(struct io_uring *ring, int fd, int i) {
    struct io_uring_sqe *q = entry(ring);
    io_uring_prep_recv_multishot(q, fd, NULL, 0, 0);
    q->flags |= IOSQE_BUFFER_SELECT;
    q->buf_group = 1;
    io_uring_sqe_set_data64(q, (unsigned)i);
}

int main(int argc, char **argv) {
    struct bounds_args args = bounds_args(argc, argv);
    int n = args.clients;
    struct io_uring ring;
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int r = io_uring_queue_init_params(8192, &ring, &p);
    if (r < 0) {
        fprintf(stderr, "io_uring: %s\n", strerror(-r));
        return 1;
    }
    struct io_uring_buf_ring *br = mmap(NULL, BUFFERS * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
                                        MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)br, .ring_entries = BUFFERS, .bgid = 1};
    if ((r = io_uring_register_buf_ring(&ring, &reg, 0)) != 0) {
        fprintf(stderr, "buffer ring: %s\n", strerror(-r));
        return 1;
    }
    io_uring_buf_ring_init(br);
    int mask = io_uring_buf_ring_mask(BUFFERS);
    for (int b = 0; b < BUFFERS; b++) io_uring_buf_ring_add(br, pool[b], BUFFER_SIZE, b, mask, b);
    io_uring_buf_ring_advance(br, BUFFERS);
    int *fds = calloc((size_t)n, sizeof *fds);
    for (int i = 0; i < n; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = bounds_service(args.port);
        if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
            perror("connect");
            return 1;
        }
        fds[i] = s;
        queue_receive(&ring, s, i);
        queue_send(&ring, s, i);
    }
    long done = 0;
    bounds_start(&args);
    while (bounds_running(&args)) {
        r = io_uring_submit_and_wait(&ring, 1);
        if (r < 0 && r != -EINTR) {
            fprintf(stderr, "wait: %s\n", strerror(-r));
            return 1;
        }
        struct io_uring_cqe *c;
        unsigned head, seen = 0, given = 0;
        io_uring_for_each_cqe(&ring, head, c) {
            seen++;
            unsigned long long tag = c->user_data;
            int i = (int)(tag & 0xffffffffu);
            if (tag & SEND_TAG) { /* only a failed send makes a completion */
                fprintf(stderr, "send: %s\n", strerror(-c->res));
                return 1;
            }
            if (c->res <= 0) {
                fprintf(stderr, "receive: %d\n", c->res);
                return 1;
            }
            done++;
            int bid = (int)(c->flags >> IORING_CQE_BUFFER_SHIFT);
            io_uring_buf_ring_add(br, pool[bid], BUFFER_SIZE, bid, mask, given++);
            if (!(c->flags & IORING_CQE_F_MORE)) queue_receive(&ring, fds[i], i); /* the kernel ended it */
            queue_send(&ring, fds[i], i);
        }
        io_uring_buf_ring_advance(br, given);
        io_uring_cq_advance(&ring, seen);
    }
    printf("requests %ld\n", done);
    return 0;
}
