/*
 * netsift_client.h — the C API of the netsiftd client (libnetsift_client.so.0).
 *
 * netsiftd owns the capture sources and one filter graph; an application connects over a
 * Unix socket, opens flows written in the graph language, and reads the packets each flow
 * accepts straight from shared memory: no system call per packet, no copy under slow-reader
 * preference.
 *
 *     cc app.c -I crates/client-c/include -L target/release -lnetsift_client
 *
 *     char err[NETSIFT_ERRBUF_SIZE];
 *     netsift_client *c = netsift_connect(NULL, err);
 *     netsift_flow *f = netsift_open(c, "(device,\"eth0\") -> (bpf,\"tcp\")", NULL, err);
 *     netsift_packet p;
 *     while (!netsift_finished(f)) {
 *         netsift_wait(f, 64, 100);
 *         while (netsift_next(f, &p) == 1)
 *             handle(p.data, p.caplen);
 *         netsift_release(f);           // once per batch
 *     }
 *     netsift_close(f);
 *     netsift_disconnect(c);
 *
 * Rules that hold for every function:
 * - A null pointer argument is never dereferenced: the function fails (or does nothing).
 * - `errbuf`, where a function takes one, may be null; otherwise it must point to
 *   NETSIFT_ERRBUF_SIZE writable bytes and receives a NUL-terminated message on failure
 *   (truncated to fit; flow errors keep their caret lines).
 * - A client and its flows may be used from any thread, but one flow by one thread at a time.
 * - No function unwinds or aborts because of an internal error: it fails instead.
 */
#ifndef NETSIFT_CLIENT_H
#define NETSIFT_CLIENT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The size of an error buffer. */
#define NETSIFT_ERRBUF_SIZE 1024

/* A connection to netsiftd. */
typedef struct netsift_client netsift_client;

/* An open flow: its reader over shared memory and its filters' MBufs. */
typedef struct netsift_flow netsift_flow;

/* How a flow asks to be buffered (set the defaults with netsift_options_init first). */
typedef struct netsift_options {
    /* 0: slow-reader preference (the default: nothing delivered is overwritten, packets that
     * do not fit are dropped and counted, data is lent without a copy);
     * nonzero: fast-reader preference (the daemon never waits: the oldest packets are
     * overwritten and counted as lost, data is a copy). */
    int fast_reader;
    /* PBuf slots, bytes per slot, IBuf entries of the flow. */
    uint32_t slots, slot_size, ibuf;
    /* The longest packet stored (longer ones are cut); 0: one slot. A packet longer than a slot
     * takes consecutive slots, so small slots hold small packets densely. */
    uint32_t max_packet;
    /* The callback period the application will use, checked by the daemon's policy; 0: none. */
    uint64_t callback_every;
} netsift_options;

/* A packet, as netsift_next lends it. */
typedef struct netsift_packet {
    /* The stored bytes (caplen of them; see netsift_next for how long they stay valid). */
    const uint8_t *data;
    /* Stored length (at most max_packet, or the slot size) and length on the wire. */
    uint32_t caplen, wirelen;
    /* Capture time: seconds since the Unix epoch and nanoseconds. */
    int64_t ts_sec;
    uint32_t ts_nsec;
    /* The link type of data (a LINKTYPE_ value: 1 is Ethernet). */
    uint32_t linktype;
    /* The filter's 32-bit result. */
    uint32_t result;
    /* Packets of this flow overwritten just before this one (fast-reader preference). */
    uint64_t lost_before;
} netsift_packet;

/* A flow's counters, as the daemon sees them.
 * NOTE: `struct netsift_stats` has no typedef: C gives types and functions one namespace, and
 * the name belongs to the function netsift_stats (as with POSIX `struct stat` and `stat`). */
struct netsift_stats {
    uint64_t appended;    /* entries appended to the flow's IBuf */
    uint64_t delivered;   /* packets the application read */
    uint64_t dropped;     /* accepted but did not fit (slow-reader preference) */
    uint64_t overwritten; /* overwritten before they were read (fast-reader preference) */
};

/* Fill *o with the defaults: slow reader, 4096 slots of 2048 bytes, packets cut to a slot, 4096
 * IBuf entries, no callback period. Does nothing if o is null. */
void netsift_options_init(netsift_options *o);

/* Connect to netsiftd at path (null or "": $NETSIFT_SOCKET, else /run/netsift/netsiftd.sock).
 * Returns null on failure, with the reason in errbuf. */
netsift_client *netsift_connect(const char *path, char *errbuf);

/* Free the client. Flows opened through it keep working (they share the connection) until
 * they are closed. Null is ignored. */
void netsift_disconnect(netsift_client *c);

/* Create, authorise and activate a flow: graph is one flow in the graph language, starting at
 * a source, e.g. "(device,\"eth0\") -> (bpf,\"tcp\")"; o null means the defaults. Returns
 * null on failure, with the reason in errbuf (for a bad graph: the text with a caret). */
netsift_flow *netsift_open(netsift_client *c, const char *graph, const netsift_options *o,
                           char *errbuf);

/* Read the next packet into *out, with no system call. Returns 1 for a packet, 0 if none is
 * available now (or f or out is null).
 *
 * Lifetime of out->data:
 * - slow-reader preference: it points into the shared packet buffer, which the daemon does
 *   not reuse while the flow holds the packet — until netsift_release or netsift_close on f
 *   (later netsift_next calls do not end it, so a whole batch may be kept until release);
 * - fast-reader preference: it points to the flow's private copy, valid until the next
 *   netsift_next, netsift_release or netsift_close on f. */
int netsift_next(netsift_flow *f, netsift_packet *out);

/* Block until at least n packets are available (n is clamped to 1 .. the IBuf size),
 * timeout_ms milliseconds passed (negative: no limit) or the source ended. Returns the number
 * available (0 if f is null). Packets read and not released stay held while waiting: release
 * first under slow-reader preference, or the daemon may have to drop packets. */
int netsift_wait(netsift_flow *f, unsigned n, int timeout_ms);

/* Release every packet read so far (one store, no system call): call it after each batch.
 * The data pointers of the released packets become invalid. */
void netsift_release(netsift_flow *f);

/* 1 if the flow's source ended and every packet was read, else 0 (also for null). */
int netsift_finished(netsift_flow *f);

/* The link type of the flow's packets (0 for null). */
uint32_t netsift_linktype(netsift_flow *f);

/* The flow's number in the daemon (0 for null). */
uint64_t netsift_flow_id(netsift_flow *f);

/* Word `word` of the MBuf of the flow's `filter`-th filter (counting from 0 in the order of
 * the graph text, the source included), e.g. filter 2, word 0 of
 * "(gen,1,10) -> (bpf,\"tcp\") -> (packetcount,,8)" is the packet count.
 * Returns 0 and stores it in *value, or -1 if there is no such MBuf or word (or a null). */
int netsift_mbuf_get(netsift_flow *f, unsigned filter, unsigned word, uint64_t *value);

/* Set a word of a filter's MBuf (shared with the filter in the daemon). 0 ok, -1 as above. */
int netsift_mbuf_set(netsift_flow *f, unsigned filter, unsigned word, uint64_t value);

/* Ask the daemon for the flow's counters. 0 ok, -1 with the reason in errbuf. */
int netsift_stats(netsift_flow *f, struct netsift_stats *out, char *errbuf);

/* Stop delivery to the flow (its filters keep running for other flows) / deliver again.
 * 0 ok, -1 with the reason in errbuf. */
int netsift_pause(netsift_flow *f, char *errbuf);
int netsift_resume(netsift_flow *f, char *errbuf);

/* Close the flow in the daemon and free it; every data pointer it lent becomes invalid.
 * Null is ignored. */
void netsift_close(netsift_flow *f);

/* The library's version, e.g. "netsift_client 0.1.0" (a static string). */
const char *netsift_version(void);

#ifdef __cplusplus
}
#endif

#endif /* NETSIFT_CLIENT_H */
