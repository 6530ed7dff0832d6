/*
 * kl_loadgen: the load client of kafkalite's benchmark harness (bench/).
 *
 * Written in C on librdkafka so that the client is not what limits a Python
 * broker. One binary, three modes, one JSON line on stdout at the end:
 *
 *   kl_loadgen produce -b HOST:PORT -t TOPIC [options]   throughput (+ delivery latency)
 *   kl_loadgen consume -b HOST:PORT -t TOPIC [options]   read a backlog from the start
 *   kl_loadgen e2e     -b HOST:PORT -t TOPIC [options]   paced producers + consumers in one
 *                                                         process: end-to-end latency
 *
 * Options:
 *   -P N   partitions of the topic (0..N-1)             -s N   record size in bytes (>= 8)
 *   -n N   records to produce / consume (0: no limit)   -d S   duration limit, seconds
 *   -r N   records per second in total (0: unpaced)     -a A   acks: 0, 1 or all
 *   -l MS  linger.ms                                    -z C   compression codec
 *   -C N   clients: N producer and N consumer handles; client k owns partitions p % N == k
 *   -w S   warm-up seconds: latencies of records sent earlier are not recorded
 *   -X K=V any librdkafka property (repeatable)         -q     fewer librdkafka logs
 *
 * Each record starts with the CLOCK_MONOTONIC send time in nanoseconds (the
 * clock is system wide, so producer and consumer may be different processes);
 * the rest is word-like text, so compression has something to do. Consumers
 * use librdkafka's partition-assignment API (no group), so the figures are
 * those of the data path; consumer groups are not involved.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ clock */

static inline int64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ns(int64_t ns) {
        struct timespec ts = {ns / 1000000000LL, ns % 1000000000LL};
        nanosleep(&ts, NULL);
}

/* -------------------------------------------------------------- histogram */
/* Log-linear buckets in microseconds: exact below 1024 us, then 512
 * sub-buckets per power of two (< 0.2% error). Fixed memory whatever the
 * record count, so millions of samples cost nothing. */

#define H_SUB 512
#define H_EXP 40
#define H_BUCKETS (1024 + H_EXP * H_SUB)

typedef struct {
        uint64_t b[H_BUCKETS];
        uint64_t n;
        uint64_t max_us;
} hist_t;

static inline size_t h_index(uint64_t us) {
        if (us < 1024)
                return (size_t)us;
        int e = 63 - __builtin_clzll(us) - 9;
        if (e > H_EXP)
                return H_BUCKETS - 1;
        return 1024 + (size_t)(e - 1) * H_SUB + (size_t)((us >> e) - H_SUB);
}

static inline uint64_t h_value(size_t i) {
        if (i < 1024)
                return i;
        size_t e = (i - 1024) / H_SUB + 1;
        uint64_t sub = (i - 1024) % H_SUB + H_SUB;
        return (sub << e) + ((1ULL << e) >> 1);
}

static inline void h_add_ns(hist_t *h, int64_t ns) {
        uint64_t us = ns > 0 ? (uint64_t)(ns / 1000) : 0;
        h->b[h_index(us)]++;
        h->n++;
        if (us > h->max_us)
                h->max_us = us;
}

static double h_pct_ms(const hist_t *h, double q) {
        if (!h->n)
                return 0.0;
        uint64_t target = (uint64_t)(q * (double)h->n);
        if (target < 1)
                target = 1;
        uint64_t seen = 0;
        for (size_t i = 0; i < H_BUCKETS; i++) {
                seen += h->b[i];
                if (seen >= target) {
                        uint64_t v = h_value(i);
                        return (double)(v > h->max_us ? h->max_us : v) / 1000.0;
                }
        }
        return (double)h->max_us / 1000.0;
}

/* ---------------------------------------------------------------- options */

#define MAX_X 64

typedef struct {
        const char *mode;
        const char *brokers;
        const char *topic;
        int partitions;
        int size;
        int64_t count;
        double duration;
        double rate;
        const char *acks;
        int linger_ms;
        const char *codec;
        int clients;
        double warmup;
        int quiet;
        const char *xkeys[MAX_X];
        const char *xvals[MAX_X];
        int nx;
} opts_t;

static opts_t O = {
    .partitions = 1,
    .size = 100,
    .acks = "1",
    .linger_ms = 5,
    .codec = "none",
    .clients = 1,
};

static atomic_int stop_flag;
static atomic_int errors_printed;

static void on_signal(int sig) {
        (void)sig;
        atomic_store(&stop_flag, 1);
}

static void die(const char *fmt, const char *arg) {
        fprintf(stderr, "kl_loadgen: ");
        fprintf(stderr, fmt, arg);
        fprintf(stderr, "\n");
        exit(2);
}

/* Partition j (0-based) of the partitions client c owns: p % clients == c. */
static int owned_count(int c) {
        if (O.clients <= 1)
                return O.partitions;
        return (O.partitions - c + O.clients - 1) / O.clients;
}

static int owned_partition(int c, int64_t j) {
        int n = owned_count(c);
        if (O.clients <= 1)
                return (int)(j % n);
        return c + (int)(j % n) * O.clients;
}

/* --------------------------------------------------------------- librdkafka */

static void set(rd_kafka_conf_t *conf, const char *k, const char *v) {
        char err[512];
        if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
                fprintf(stderr, "kl_loadgen: %s=%s: %s\n", k, v, err);
                exit(2);
        }
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
        (void)rk;
        (void)opaque;
        if (atomic_fetch_add(&errors_printed, 1) < 20)
                fprintf(stderr, "kl_loadgen: librdkafka error %s: %s\n",
                        rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

static rd_kafka_conf_t *base_conf(void) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        set(conf, "bootstrap.servers", O.brokers);
        set(conf, "socket.nagle.disable", "true");
        set(conf, "client.id", "kl_loadgen");
        if (O.quiet)
                set(conf, "log_level", "3");
        rd_kafka_conf_set_error_cb(conf, error_cb);
        return conf;
}

static void apply_x(rd_kafka_conf_t *conf) {
        for (int i = 0; i < O.nx; i++)
                set(conf, O.xkeys[i], O.xvals[i]);
}

/* ---------------------------------------------------------------- payload */

static char *text;            /* word-like filler, generated once */
static size_t text_len;

static void make_text(void) {
        static const char *words[] = {
            "kafka", "broker", "partition", "offset", "record", "batch", "segment",
            "index", "leader", "replica", "fetch", "produce", "topic", "consumer",
            "group", "commit", "lorem", "ipsum", "dolor", "sit", "amet", "the",
            "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "0", "1", "42"};
        const size_t nw = sizeof(words) / sizeof(words[0]);
        text_len = 1 << 20;
        text = malloc(text_len + 64);
        uint64_t x = 0x9E3779B97F4A7C15ULL;
        size_t pos = 0;
        while (pos < text_len) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                const char *w = words[x % nw];
                size_t l = strlen(w);
                memcpy(text + pos, w, l);
                pos += l;
                text[pos++] = ' ';
        }
}

static void fill(char *buf, int size, int64_t i) {
        size_t n = (size_t)size - 8;
        size_t start = (size_t)((uint64_t)i * 7919u % (text_len - n));
        memcpy(buf + 8, text + start, n);
}

/* --------------------------------------------------------------- producer */

typedef struct {
        int64_t warm_start;   /* record latencies of records sent at or after this */
        int64_t sent, delivered, errors, bytes;
        hist_t lat;           /* produce() -> delivery report */
} pstats_t;

static pstats_t PS;
static rd_kafka_t **prod;
static rd_kafka_topic_t **prod_topic;
static _Atomic int64_t prod_start;
static int64_t prod_end_produce, prod_done;
static atomic_int producer_finished;

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        (void)rk;
        (void)opaque;
        if (m->err) {
                PS.errors++;
                if (atomic_fetch_add(&errors_printed, 1) < 20)
                        fprintf(stderr, "kl_loadgen: delivery failed: %s\n",
                                rd_kafka_err2str(m->err));
                return;
        }
        PS.delivered++;
        PS.bytes += (int64_t)m->len;
        if (m->len >= 8) {
                int64_t stamp;
                memcpy(&stamp, m->payload, 8);
                if (stamp >= PS.warm_start)
                        h_add_ns(&PS.lat, now_ns() - stamp);
        }
}

static void make_producers(void) {
        char err[512], buf[32];
        prod = calloc((size_t)O.clients, sizeof(*prod));
        prod_topic = calloc((size_t)O.clients, sizeof(*prod_topic));
        for (int c = 0; c < O.clients; c++) {
                rd_kafka_conf_t *conf = base_conf();
                set(conf, "acks", O.acks);
                snprintf(buf, sizeof(buf), "%d", O.linger_ms);
                set(conf, "linger.ms", buf);
                set(conf, "compression.codec", O.codec);
                set(conf, "queue.buffering.max.messages", "2000000");
                apply_x(conf);
                rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
                prod[c] = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
                if (!prod[c])
                        die("producer: %s", err);
                prod_topic[c] = rd_kafka_topic_new(prod[c], O.topic, NULL);
        }
}

static void poll_producers(void) {
        for (int c = 0; c < O.clients; c++)
                rd_kafka_poll(prod[c], 0);
}

/* Produce O.count records (or for O.duration seconds) at O.rate, then flush. */
static void *produce_loop(void *arg) {
        (void)arg;
        char *buf = malloc((size_t)O.size);
        int64_t start = now_ns();
        int64_t end = O.duration > 0 ? start + (int64_t)(O.duration * 1e9) : INT64_MAX;
        prod_start = start;
        PS.warm_start = start + (int64_t)(O.warmup * 1e9);
        int64_t i = 0;
        while ((O.count <= 0 || i < O.count) && !atomic_load(&stop_flag)) {
                int64_t t = now_ns();
                if (t >= end)
                        break;
                if (O.rate > 0) {
                        int64_t due = start + (int64_t)((double)i * 1e9 / O.rate);
                        if (due > t) {
                                poll_producers();
                                int64_t gap = due - now_ns();
                                if (gap > 20000)
                                        sleep_ns(gap > 1000000 ? 1000000 : gap);
                                continue;
                        }
                }
                int c = (int)(i % O.clients);
                int part = owned_partition(c, i / O.clients);
                fill(buf, O.size, i);
                int64_t stamp = now_ns();
                memcpy(buf, &stamp, 8);
                for (;;) {
                        rd_kafka_resp_err_t err = rd_kafka_producev(
                            prod[c], RD_KAFKA_V_RKT(prod_topic[c]), RD_KAFKA_V_PARTITION(part),
                            RD_KAFKA_V_VALUE(buf, (size_t)O.size),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
                        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                                rd_kafka_poll(prod[c], 1);
                                continue;
                        }
                        if (err) {
                                PS.errors++;
                                if (atomic_fetch_add(&errors_printed, 1) < 20)
                                        fprintf(stderr, "kl_loadgen: produce: %s\n",
                                                rd_kafka_err2str(err));
                        }
                        break;
                }
                i++;
                if (O.rate > 0 || (i & 1023) == 0)
                        poll_producers();
        }
        PS.sent = i;
        prod_end_produce = now_ns();
        for (int c = 0; c < O.clients; c++)
                rd_kafka_flush(prod[c], 60000);
        poll_producers();
        prod_done = now_ns();
        atomic_store(&producer_finished, 1);
        free(buf);
        return NULL;
}

static void destroy_producers(void) {
        for (int c = 0; c < O.clients; c++) {
                rd_kafka_topic_destroy(prod_topic[c]);
                rd_kafka_destroy(prod[c]);
        }
}

/* --------------------------------------------------------------- consumer */

typedef struct {
        rd_kafka_t *rk;
        rd_kafka_topic_t *rkt;
        rd_kafka_queue_t *q;
        int pipe_r, pipe_w;
        int eofs;
} cons_t;

typedef struct {
        int64_t received, bytes, errors, eofs;
        int64_t first, last;
        hist_t lat;   /* send time in the record -> consumed */
} cstats_t;

static cstats_t CS;
static cons_t *cons;

static void make_consumers(int64_t offset, int eof) {
        char err[512];
        cons = calloc((size_t)O.clients, sizeof(*cons));
        for (int c = 0; c < O.clients; c++) {
                rd_kafka_conf_t *conf = base_conf();
                set(conf, "enable.partition.eof", eof ? "true" : "false");
                apply_x(conf);
                cons[c].rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
                if (!cons[c].rk)
                        die("consumer: %s", err);
                cons[c].rkt = rd_kafka_topic_new(cons[c].rk, O.topic, NULL);
                cons[c].q = rd_kafka_queue_new(cons[c].rk);
                int fds[2];
                if (pipe2(fds, O_NONBLOCK | O_CLOEXEC))
                        die("pipe: %s", strerror(errno));
                cons[c].pipe_r = fds[0];
                cons[c].pipe_w = fds[1];
                rd_kafka_queue_io_event_enable(cons[c].q, fds[1], "x", 1);
                for (int j = 0; j < owned_count(c); j++) {
                        int p = owned_partition(c, j);
                        if (rd_kafka_consume_start_queue(cons[c].rkt, p, offset, cons[c].q) == -1)
                                die("consume_start: %s",
                                    rd_kafka_err2str(rd_kafka_last_error()));
                }
        }
}

/* Take everything queued on consumer c; returns the number of records. */
static int64_t drain(cons_t *c, int latency, int64_t warm_start) {
        rd_kafka_message_t *ms[1024];
        int64_t got = 0;
        ssize_t n;
        char junk[256];
        while (read(c->pipe_r, junk, sizeof(junk)) > 0)
                ;
        while ((n = rd_kafka_consume_batch_queue(c->q, 0, ms, 1024)) > 0) {
                int64_t t = now_ns();
                for (ssize_t k = 0; k < n; k++) {
                        rd_kafka_message_t *m = ms[k];
                        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                                c->eofs++;
                                CS.eofs++;
                        } else if (m->err) {
                                CS.errors++;
                                if (atomic_fetch_add(&errors_printed, 1) < 20)
                                        fprintf(stderr, "kl_loadgen: consume: %s\n",
                                                rd_kafka_message_errstr(m));
                        } else {
                                if (!CS.received)
                                        CS.first = t;
                                CS.last = t;
                                CS.received++;
                                CS.bytes += (int64_t)m->len;
                                got++;
                                if (latency && m->len >= 8) {
                                        int64_t stamp;
                                        memcpy(&stamp, m->payload, 8);
                                        if (stamp >= warm_start)
                                                h_add_ns(&CS.lat, t - stamp);
                                }
                        }
                        rd_kafka_message_destroy(m);
                }
        }
        return got;
}

static void destroy_consumers(void) {
        for (int c = 0; c < O.clients; c++) {
                int parts = owned_count(c);
                for (int j = 0; j < parts; j++)
                        rd_kafka_consume_stop(cons[c].rkt, owned_partition(c, j));
                rd_kafka_queue_destroy(cons[c].q);
                rd_kafka_topic_destroy(cons[c].rkt);
                rd_kafka_destroy(cons[c].rk);
                close(cons[c].pipe_r);
                close(cons[c].pipe_w);
        }
}

/* epoll over every consumer queue's wake-up pipe until done() says so. */
typedef int (*done_fn)(void);

static void consume_loop(done_fn done, int latency, const int64_t *warm_start) {
        int ep = epoll_create1(EPOLL_CLOEXEC);
        for (int c = 0; c < O.clients; c++) {
                struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)c};
                epoll_ctl(ep, EPOLL_CTL_ADD, cons[c].pipe_r, &ev);
        }
        struct epoll_event evs[256];
        int64_t sweep = now_ns();
        while (!done() && !atomic_load(&stop_flag)) {
                int n = epoll_wait(ep, evs, 256, 50);
                int64_t ws = *warm_start;
                for (int k = 0; k < n; k++)
                        drain(&cons[evs[k].data.u32], latency, ws);
                if (n <= 0 || now_ns() - sweep > 200000000LL) {
                        /* belt and braces: a wake-up is only sent on empty -> non-empty */
                        for (int c = 0; c < O.clients; c++)
                                drain(&cons[c], latency, ws);
                        sweep = now_ns();
                }
        }
        close(ep);
}

/* ------------------------------------------------------------------ modes */

static int64_t consume_deadline;
static int64_t zero;

static int consume_done(void) {
        if (O.count > 0 && CS.received >= O.count)
                return 1;
        if (CS.eofs >= O.partitions && CS.received > 0)
                return 1;
        return now_ns() >= consume_deadline;
}

static int64_t e2e_deadline;

static int e2e_done(void) {
        if (!atomic_load(&producer_finished))
                return 0;
        if (!e2e_deadline)
                e2e_deadline = now_ns() + 10000000000LL;
        return CS.received >= PS.delivered || now_ns() >= e2e_deadline;
}

static double secs(int64_t a, int64_t b) { return (double)(b - a) / 1e9; }

static double cpu_seconds(void) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void print_lat(const char *name, const hist_t *h) {
        printf(",\"%s\":{\"n\":%" PRIu64 ",\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f}",
               name, h->n, h_pct_ms(h, 0.5), h_pct_ms(h, 0.99), h_pct_ms(h, 0.999),
               (double)h->max_us / 1000.0);
}

static void print_head(void) {
        printf("{\"client\":\"librdkafka %s\",\"mode\":\"%s\",\"clients\":%d,\"partitions\":%d,"
               "\"size\":%d,\"acks\":\"%s\",\"linger_ms\":%d,\"compression\":\"%s\",\"rate\":%.0f",
               rd_kafka_version_str(), O.mode, O.clients, O.partitions, O.size, O.acks,
               O.linger_ms, O.codec, O.rate);
}

static void print_produce(void) {
        double s = secs(prod_start, prod_done);
        printf(",\"sent\":%" PRId64 ",\"delivered\":%" PRId64 ",\"errors\":%" PRId64
               ",\"seconds\":%.4f,\"msg_per_s\":%.1f,\"mb_per_s\":%.3f",
               PS.sent, PS.delivered, PS.errors, s, (double)PS.delivered / s,
               (double)PS.bytes / s / 1e6);
}

static int run_produce(void) {
        make_producers();
        produce_loop(NULL);
        print_head();
        print_produce();
        print_lat("delivery_ms", &PS.lat);
        printf(",\"cpu_s\":%.3f}\n", cpu_seconds());
        destroy_producers();
        return PS.errors ? 1 : 0;
}

static int run_consume(void) {
        int64_t start = now_ns();
        consume_deadline = O.duration > 0 ? start + (int64_t)(O.duration * 1e9) : INT64_MAX;
        make_consumers(RD_KAFKA_OFFSET_BEGINNING, 1);
        consume_loop(consume_done, 1, &zero);
        int64_t end = now_ns();
        double s = CS.received > 1 ? secs(CS.first, CS.last) : secs(start, end);
        print_head();
        printf(",\"received\":%" PRId64 ",\"errors\":%" PRId64
               ",\"seconds\":%.4f,\"total_seconds\":%.4f,\"msg_per_s\":%.1f,\"mb_per_s\":%.3f",
               CS.received, CS.errors, s, secs(start, end), (double)CS.received / s,
               (double)CS.bytes / s / 1e6);
        print_lat("age_ms", &CS.lat);
        printf(",\"cpu_s\":%.3f}\n", cpu_seconds());
        destroy_consumers();
        return CS.errors ? 1 : 0;
}

static int prime_done(void) {
        return CS.received >= O.partitions || now_ns() >= consume_deadline;
}

/* One record with send time 0 to every partition, consumed before the clock
 * starts: every consumer is then connected and fetching, so the paced phase
 * measures the broker, not clients joining. */
static void prime(void) {
        char *buf = calloc(1, (size_t)O.size);
        PS.warm_start = INT64_MAX;
        for (int p = 0; p < O.partitions; p++) {
                int c = p % O.clients;
                rd_kafka_producev(prod[c], RD_KAFKA_V_RKT(prod_topic[c]), RD_KAFKA_V_PARTITION(p),
                                  RD_KAFKA_V_VALUE(buf, (size_t)O.size),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        }
        for (int c = 0; c < O.clients; c++)
                rd_kafka_flush(prod[c], 60000);
        consume_deadline = now_ns() + 60000000000LL;
        static const int64_t never = INT64_MAX;
        consume_loop(prime_done, 0, &never);
        if (CS.received < O.partitions)
                fprintf(stderr, "kl_loadgen: priming saw %" PRId64 " of %d records\n",
                        CS.received, O.partitions);
        memset(&PS, 0, sizeof(PS));
        memset(&CS, 0, sizeof(CS));
        free(buf);
}

static int run_e2e(void) {
        make_consumers(RD_KAFKA_OFFSET_BEGINNING, 0);
        make_producers();
        prime();
        int64_t warm = INT64_MAX;
        PS.warm_start = INT64_MAX;
        pthread_t th;
        pthread_create(&th, NULL, produce_loop, NULL);
        /* wait for the producer thread to publish its start time */
        while (!prod_start && !atomic_load(&producer_finished))
                sleep_ns(100000);
        warm = prod_start + (int64_t)(O.warmup * 1e9);
        consume_loop(e2e_done, 1, &warm);
        pthread_join(th, NULL);
        print_head();
        print_produce();
        printf(",\"received\":%" PRId64 ",\"consume_errors\":%" PRId64, CS.received, CS.errors);
        print_lat("delivery_ms", &PS.lat);
        print_lat("e2e_ms", &CS.lat);
        printf(",\"cpu_s\":%.3f}\n", cpu_seconds());
        destroy_producers();
        destroy_consumers();
        return (PS.errors || CS.errors || CS.received < PS.delivered) ? 1 : 0;
}

/* ------------------------------------------------------------------- main */

static void usage(void) {
        fprintf(stderr,
                "usage: kl_loadgen produce|consume|e2e -b HOST:PORT -t TOPIC [-P parts] [-s size]\n"
                "       [-n count] [-d seconds] [-r rate] [-a acks] [-l linger_ms] [-z codec]\n"
                "       [-C clients] [-w warmup_s] [-X key=value]... [-q]\n");
        exit(2);
}

int main(int argc, char **argv) {
        if (argc < 2)
                usage();
        O.mode = argv[1];
        int opt;
        optind = 2;
        while ((opt = getopt(argc, argv, "b:t:P:s:n:d:r:a:l:z:C:w:X:q")) != -1) {
                switch (opt) {
                case 'b': O.brokers = optarg; break;
                case 't': O.topic = optarg; break;
                case 'P': O.partitions = atoi(optarg); break;
                case 's': O.size = atoi(optarg); break;
                case 'n': O.count = atoll(optarg); break;
                case 'd': O.duration = atof(optarg); break;
                case 'r': O.rate = atof(optarg); break;
                case 'a': O.acks = optarg; break;
                case 'l': O.linger_ms = atoi(optarg); break;
                case 'z': O.codec = optarg; break;
                case 'C': O.clients = atoi(optarg); break;
                case 'w': O.warmup = atof(optarg); break;
                case 'q': O.quiet = 1; break;
                case 'X': {
                        char *eq = strchr(optarg, '=');
                        if (!eq || O.nx >= MAX_X)
                                usage();
                        *eq = '\0';
                        O.xkeys[O.nx] = optarg;
                        O.xvals[O.nx++] = eq + 1;
                        break;
                }
                default: usage();
                }
        }
        if (!O.brokers || !O.topic || O.size < 8 || O.partitions < 1 || O.clients < 1 ||
            O.clients > O.partitions)
                usage();
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        make_text();
        if (!strcmp(O.mode, "produce"))
                return run_produce();
        if (!strcmp(O.mode, "consume"))
                return run_consume();
        if (!strcmp(O.mode, "e2e"))
                return run_e2e();
        usage();
        return 2;
}
