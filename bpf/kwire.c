//go:build ignore

// kwire's socket probes: the bytes TCP sockets on the broker ports move
// through read/write-family system calls, delivered to user space through
// a ring buffer with enough context (process, socket 4-tuple, direction,
// byte offset in the stream) to rebuild each direction of a connection.
//
// Hooks: syscall tracepoints (enter + exit of read, write, readv, writev,
// recvfrom, sendto, recvmsg, sendmsg, sendfile64) and sock/inet_sock_set_state
// (connection opened, closed). Needs kernel 5.8+ (ring buffer) with BTF.
//
// What is copied: at most cfg_snap bytes per call (a budget shared by the
// iovecs of a vectored call); the rest of the call is reported as a hole of
// known length, as is every sendfile64. Group-coordination frames are small
// and arrive whole; Produce and Fetch bodies lose their tail.
//
// Events are submitted without waking the reader (it polls every few ms),
// unless a quarter of the ring is in use; failed reservations are counted.
// User space mutes a socket (map muted) when it already follows the other
// end of its connection (loopback), or does not want it (not Kafka).
//
// TLS (kwire live --ebpf --tls): uprobes on the plaintext side of TLS
// libraries in client processes, OpenSSL's SSL_read/SSL_write (and _ex)
// and Go's crypto/tls.(*Conn).Read/Write, report the plaintext of a
// connection as its bytes, on the socket the library writes to: the same
// socket, process and 4-tuple the syscall probes report. Such a socket is
// marked TLS (FLAG_TLS in its state) before its first byte goes out, and
// from then on its system calls move ciphertext, which is counted
// (CNT_TLS_CIPHER) and not reported: each byte of the connection is taken
// once, as plaintext. See tls_* below.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define MSG_PEEK 2

#define TCP_SYN_SENT 2
#define TCP_SYN_RECV 3
#define TCP_CLOSE 7

#define MAX_IOV 32
#define MAX_SNAP 65536

// Event kinds.
enum kind {
	KIND_DATA = 0,  // offset, len, copied, data
	KIND_CLOSE = 1, // the socket reached TCP_CLOSE; offset/aux: bytes sent/received
};

// Event and socket flags.
enum flag {
	FLAG_SERVER = 1,    // the local port is a broker port: the local end is the broker
	FLAG_HANDSHAKE = 2, // the connection was seen opening: offsets count from its first byte
	FLAG_SENDFILE = 4,  // a sendfile64: bytes moved but never visible to the probe
	FLAG_RESET = 8,     // close: straight from ESTABLISHED, CLOSE_WAIT or SYN_*: reset or abort
	FLAG_TLS = 16,      // data: plaintext from a TLS library; socket: its system calls move ciphertext
};

// Directions, relative to the local socket.
enum dir {
	DIR_SEND = 0,
	DIR_RECV = 1,
	DIR_NONE = 2, // a TLS handshake call: no data of its own
};

// Counters (per-CPU array indexes), read by user space.
enum counter {
	CNT_EVENTS = 0,    // events submitted
	CNT_DROPS = 1,     // bpf_ringbuf_reserve failures: events lost
	CNT_READ_ERRS = 2, // user memory that could not be read (sent as a hole)
	CNT_IOV_TRUNC = 3, // vectored calls with more than MAX_IOV iovecs (rest as a hole)
	CNT_TLS_CALLS = 4,   // TLS library calls whose plaintext was reported
	CNT_TLS_NO_SOCK = 5, // TLS library calls that moved bytes on a socket never found: plaintext lost
	CNT_TLS_CIPHER = 6,  // ciphertext bytes of TLS sockets, not reported (their plaintext is)
	CNT_MAX = 7,
};

struct event {
	__u64 ts;     // bpf_ktime_get_ns
	__u64 sk;     // socket address: an identity only, with gen
	__u64 gen;    // when the socket's state was created (ktime ns)
	__u64 cgroup; // cgroup v2 id
	__u64 offset; // data: stream offset of the first byte; close: bytes sent
	__u64 aux;    // close: bytes received
	__u32 len;    // data: bytes the call moved at offset
	__u32 copied; // data: bytes in data[] (the first of len)
	__u32 pid;    // tgid
	__u32 tid;
	__u8 comm[16]; // the process's (thread group leader's) comm
	__u8 laddr[16];
	__u8 raddr[16];
	__u16 lport;
	__u16 rport;
	__u16 family;
	__u8 kind;
	__u8 dir;
	__u8 flags;
	__u8 pad[7];
	__u8 data[];
};

// Per-socket state: bytes counted so far in each direction.
struct sock_state {
	__u64 off[2];
	__u64 gen;
	__u32 flags;
	__u32 pad;
};

// A call in flight, stashed by sys_enter for sys_exit.
struct call {
	__u64 sk;
	__u64 buf; // buffer, or iovec array when iovcnt > 0
	__u64 iovcnt;
	__u8 dir;
	__u8 sendfile;
	__u8 side; // FLAG_SERVER or 0
	__u8 cipher; // a TLS socket: count the bytes, report nothing
	__u8 pad[4];
};

// Configuration, set by user space before loading.
const volatile __u32 cfg_snap = 4096;   // bytes copied per call at most
const volatile __u32 cfg_pid = 0;       // only this tgid (0: any)
const volatile __u64 cfg_cgroup = 0;    // only this cgroup v2 id (0: any)
const volatile __u8 cfg_use_comm = 0;   // only processes named cfg_comm
const volatile __u8 cfg_comm[16] = {};  // NUL-padded
const volatile __u64 cfg_wake_bytes = 0; // wake the reader past this backlog only (0: kernel default)

// Force the event type into BTF for bpf2go -type.
const struct event *unused_event __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); // resized by user space
} events SEC(".maps");

// ports[p] != 0: p is a broker port.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct sock_state);
} socks SEC(".maps");

// muted[sk] == gen: user space wants nothing more from this socket (the
// other end of a connection it already follows, on loopback; not Kafka).
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} muted SEC(".maps");

// calls[pid_tgid]: the call a thread is in. LRU: entries of threads that
// never came back from a call cannot fill it up.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct call);
} calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 c)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &c);
	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline void count_add(__u32 c, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &c);
	if (v)
		__sync_fetch_and_add(v, n);
}

static __always_inline int port_wanted(__u16 port)
{
	__u32 k = port;
	__u8 *v = bpf_map_lookup_elem(&ports, &k);
	return v && *v;
}

// process_wanted applies the pid, cgroup and comm filters.
static __always_inline int process_wanted(void)
{
	if (cfg_pid && (bpf_get_current_pid_tgid() >> 32) != cfg_pid)
		return 0;
	if (cfg_cgroup && bpf_get_current_cgroup_id() != cfg_cgroup)
		return 0;
	if (cfg_use_comm) {
		struct task_struct *task = (void *)bpf_get_current_task();
		char comm[16] = {};
		BPF_CORE_READ_INTO(&comm, task, group_leader, comm);
		for (int i = 0; i < 16; i++) {
			if (comm[i] != cfg_comm[i])
				return 0;
			if (!comm[i])
				break;
		}
	}
	return 1;
}

// sock_of returns the TCP socket behind fd in the current task, or NULL:
// task->files->fdt->fd[fd] is a socket file whose private_data is a
// struct socket.
static __always_inline struct sock *sock_of(__u64 fd)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return NULL;
	if ((BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT) != S_IFSOCK)
		return NULL;
	struct socket *so = BPF_CORE_READ(f, private_data);
	struct sock *sk = BPF_CORE_READ(so, sk);
	if (!sk)
		return NULL;
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family != AF_INET && family != AF_INET6)
		return NULL;
	if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return NULL;
	return sk;
}

// side returns FLAG_SERVER when the local end is the broker, 0 when the
// remote end is, -1 when neither port is a broker port.
static __always_inline int side(struct sock *sk)
{
	__u16 lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	__u16 rport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (port_wanted(rport))
		return 0;
	if (port_wanted(lport))
		return FLAG_SERVER;
	return -1;
}

// state_of returns the socket's state, created on first sight.
static __always_inline struct sock_state *state_of(__u64 sk)
{
	struct sock_state *st = bpf_map_lookup_elem(&socks, &sk);
	if (st)
		return st;
	struct sock_state fresh = {.gen = bpf_ktime_get_ns()};
	bpf_map_update_elem(&socks, &sk, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&socks, &sk);
}

static __always_inline int is_muted(__u64 sk)
{
	struct sock_state *st = bpf_map_lookup_elem(&socks, &sk);
	__u64 *gen = bpf_map_lookup_elem(&muted, &sk);
	return st && gen && *gen == st->gen;
}

// --- TLS: the state the library probes share with the syscall probes ---

// A TLS library call in flight: OpenSSL's by thread (ssl_calls), Go's by
// goroutine (go_calls: a goroutine may move between threads during a call).
struct tls_call {
	__u64 ssl;   // OpenSSL: the SSL *; Go: the *tls.Conn
	__u64 buf;   // the plaintext buffer
	__u64 exlen; // OpenSSL _ex variants: the size_t * the byte count is written to
	__u64 sk;    // the socket, once known (OpenSSL: from a system call the library makes)
	__u64 stk;   // Go: buf's distance below the goroutine's stack top, +1, when buf is on the stack
	__u32 depth; // OpenSSL: nested probed calls (SSL_connect calls SSL_do_handshake)
	__u8 dir;    // DIR_SEND (write), DIR_RECV (read), DIR_NONE (handshake)
	__u8 kafka;  // sk is on a broker port
	__u8 pad[2];
};

// ssl_calls[pid_tgid]: the OpenSSL call a thread is in.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct tls_call);
} ssl_calls SEC(".maps");

struct ssl_key {
	__u64 ssl;
	__u32 tgid;
	__u32 pad;
};

struct ssl_sock {
	__u64 sk;
	__u8 kafka;
	__u8 pad[7];
};

// ssl_socks[{tgid, SSL *}]: the socket an SSL object was last seen
// writing or reading, for calls served from the library's buffer without
// a system call.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct ssl_key);
	__type(value, struct ssl_sock);
} ssl_socks SEC(".maps");

struct go_key {
	__u64 g; // the goroutine (runtime.g *, in R14 under Go's register ABI)
	__u32 tgid;
	__u32 pad;
};

// go_calls[{tgid, g}]: the crypto/tls call a goroutine is in.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct go_key);
	__type(value, struct tls_call);
} go_calls SEC(".maps");

// mark_tls marks a socket TLS: its system calls move ciphertext from now
// on. When ciphertext of it was already reported (the process was probed
// mid-connection), the socket starts over under a new identity (gen) whose
// bytes are plaintext: user space ends the old one.
static __always_inline struct sock_state *mark_tls(__u64 sk)
{
	struct sock_state *st = state_of(sk);
	if (!st || (st->flags & FLAG_TLS))
		return st;
	if (st->off[DIR_SEND] || st->off[DIR_RECV]) {
		st->gen = bpf_ktime_get_ns();
		st->off[DIR_SEND] = 0;
		st->off[DIR_RECV] = 0;
		st->flags &= ~FLAG_HANDSHAKE;
	}
	st->flags |= FLAG_TLS; // set once; -mcpu=v1 has no atomic or
	return st;
}

// tls_nested notes the socket of a system call made inside an OpenSSL
// call: that call's socket, and the SSL object's from then on.
static __always_inline void tls_nested(__u64 sk, int kafka)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct tls_call *c = bpf_map_lookup_elem(&ssl_calls, &id);
	if (!c)
		return;
	c->sk = sk;
	c->kafka = kafka;
	struct ssl_key k = {.ssl = c->ssl, .tgid = id >> 32};
	struct ssl_sock v = {.sk = sk, .kafka = kafka};
	bpf_map_update_elem(&ssl_socks, &k, &v, BPF_ANY);
	if (kafka && !is_muted(sk))
		mark_tls(sk);
}

// enter stashes a call on a wanted socket for its exit.
static __always_inline void enter(__u64 fd, __u64 buf, __u64 iovcnt, __u8 dir, __u8 sendfile)
{
	if (!process_wanted())
		return;
	struct sock *sk = sock_of(fd);
	if (!sk)
		return;
	int sd = side(sk);
	tls_nested((__u64)sk, sd >= 0);
	if (sd < 0 || is_muted((__u64)sk))
		return;
	struct sock_state *st = bpf_map_lookup_elem(&socks, &sk);
	__u8 cipher = st && (st->flags & FLAG_TLS);
	struct call c = {.sk = (__u64)sk, .buf = buf, .iovcnt = iovcnt, .dir = dir, .sendfile = sendfile, .side = sd, .cipher = cipher};
	__u64 id = bpf_get_current_pid_tgid();
	bpf_map_update_elem(&calls, &id, &c, BPF_ANY);
}

// fill writes an event's header: the socket's 4-tuple and the process.
static __always_inline void fill(struct event *e, __u64 skaddr, __u64 gen, __u64 offset, __u32 len, __u32 dirflags)
{
	struct sock *sk = (struct sock *)skaddr;
	struct task_struct *task = (void *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid();
	e->ts = bpf_ktime_get_ns();
	e->sk = skaddr;
	e->gen = gen;
	e->cgroup = bpf_get_current_cgroup_id();
	e->offset = offset;
	e->aux = 0;
	e->len = len;
	e->copied = 0;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	BPF_CORE_READ_INTO(&e->comm, task, group_leader, comm);
	e->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	e->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	e->rport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (e->family == AF_INET) {
		__builtin_memset(e->laddr, 0, sizeof(e->laddr));
		__builtin_memset(e->raddr, 0, sizeof(e->raddr));
		bpf_core_read(e->laddr, 4, &sk->__sk_common.skc_rcv_saddr);
		bpf_core_read(e->raddr, 4, &sk->__sk_common.skc_daddr);
	} else {
		bpf_core_read(e->laddr, 16, &sk->__sk_common.skc_v6_rcv_saddr);
		bpf_core_read(e->raddr, 16, &sk->__sk_common.skc_v6_daddr);
	}
	e->kind = KIND_DATA;
	e->dir = dirflags & 0xff;
	e->flags = (dirflags >> 8) & 0xff;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
}

static __always_inline __u64 wake_flags(void)
{
	if (!cfg_wake_bytes)
		return 0;
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= cfg_wake_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

// The ring buffer takes reservations of a constant size: events come in
// size classes, so small frames do not take a snap-sized slot each.
#define EMIT_CLASS(N)                                                                   \
	if (n <= (N)) {                                                                 \
		struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e) + (N), 0);    \
		if (!e) {                                                               \
			count(CNT_DROPS);                                               \
			return -1;                                                      \
		}                                                                       \
		fill(e, sk, st->gen, offset, lencopy >> 32, dirflags);                  \
		if (n > 0) {                                                            \
			if (bpf_probe_read_user(e->data, n, (void *)ubuf) == 0)         \
				e->copied = n;                                          \
			else                                                            \
				count(CNT_READ_ERRS);                                   \
		}                                                                       \
		bpf_ringbuf_submit(e, wake_flags());                                    \
		count(CNT_EVENTS);                                                      \
		return 0;                                                               \
	}

// emit sends one piece of a call: len bytes at offset in the stream, the
// first copy of them read from ubuf (lencopy = len << 32 | copy; dirflags =
// flags << 8 | dir). A global function, so that the verifier checks it once
// rather than at every call. It returns -1 when the ring buffer is full.
__noinline int emit(__u64 sk, __u64 offset, __u64 lencopy, __u64 ubuf, __u32 dirflags)
{
	struct sock_state *st = bpf_map_lookup_elem(&socks, &sk);
	if (!st)
		return 0;
	__u64 n = lencopy & 0xffffffff;
	if (n > MAX_SNAP)
		n = MAX_SNAP;
	barrier_var(n);
	EMIT_CLASS(0)
	EMIT_CLASS(256)
	EMIT_CLASS(1024)
	EMIT_CLASS(4096)
	EMIT_CLASS(16384)
	EMIT_CLASS(MAX_SNAP)
	return 0;
}

static __always_inline __u64 pack(__u64 len, __u64 copy)
{
	return len << 32 | (copy & 0xffffffff);
}

// iov_step sends the iovec at iovp: of remain bytes still to place, at
// most budget copied (rb = remain << 32 | budget). It returns the bytes it
// placed and copied (placed << 32 | copied), 0 to stop. Global: the loop
// calling it stays small for the verifier.
__noinline __u64 iov_step(__u64 sk, __u64 offset, __u64 iovp, __u64 rb, __u32 dirflags)
{
	struct iovec v;
	if (bpf_probe_read_user(&v, sizeof(v), (void *)iovp))
		return 0;
	__u64 remain = rb >> 32, budget = rb & 0xffffffff;
	__u64 n = v.iov_len < remain ? v.iov_len : remain;
	__u64 copy = n < budget ? n : budget;
	if (n > 0)
		emit(sk, offset, pack(n, copy), (__u64)v.iov_base, dirflags);
	return pack(n, copy) | (n == 0 ? (1ULL << 63) : 0);
}

// emit_iov sends a vectored call as one piece per iovec while the copy
// budget lasts, then one hole for the rest.
static __always_inline void emit_iov(__u64 sk, __u64 offset, __u32 dirflags, struct call *c, __u64 total, __u64 budget)
{
	__u64 done = 0;
	__u64 iovcnt = c->iovcnt;
	for (int i = 0; i < MAX_IOV; i++) {
		if (i >= iovcnt || done >= total || budget == 0)
			break;
		__u64 r = iov_step(sk, offset + done, c->buf + i * sizeof(struct iovec), pack(total - done, budget), dirflags);
		if (r == 0)
			break;
		done += (r >> 32) & 0x7fffffff;
		budget -= r & 0xffffffff;
	}
	if (done < total) {
		if (budget > 0 && iovcnt > MAX_IOV)
			count(CNT_IOV_TRUNC);
		emit(sk, offset + done, pack(total - done, 0), 0, dirflags);
	}
}

static __always_inline void leave(long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct call *cp = bpf_map_lookup_elem(&calls, &id);
	if (!cp)
		return;
	struct call c = *cp;
	bpf_map_delete_elem(&calls, &id);
	if (ret <= 0)
		return;
	if (c.cipher) {
		count_add(CNT_TLS_CIPHER, ret);
		return;
	}
	struct sock_state *st = state_of(c.sk);
	if (!st)
		return;
	__u64 total = ret;
	if (total > 0xffffffff)
		total = 0xffffffff;
	__u32 flags = c.side | (st->flags & FLAG_HANDSHAKE);
	__u64 offset = __sync_fetch_and_add(&st->off[c.dir & 1], total);
	__u64 budget = total < cfg_snap ? total : cfg_snap;
	if (c.sendfile) {
		emit(c.sk, offset, pack(total, 0), 0, (flags | FLAG_SENDFILE) << 8 | c.dir);
		return;
	}
	if (c.iovcnt == 0) {
		emit(c.sk, offset, pack(total, budget), c.buf, flags << 8 | c.dir);
		return;
	}
	emit_iov(c.sk, offset, flags << 8 | c.dir, &c, total, budget);
}

#define ARG(ctx, i) ((ctx)->args[i])

SEC("tracepoint/syscalls/sys_enter_read")
int enter_read(struct trace_event_raw_sys_enter *ctx)
{
	enter(ARG(ctx, 0), ARG(ctx, 1), 0, DIR_RECV, 0);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_write")
int enter_write(struct trace_event_raw_sys_enter *ctx)
{
	enter(ARG(ctx, 0), ARG(ctx, 1), 0, DIR_SEND, 0);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_readv")
int enter_readv(struct trace_event_raw_sys_enter *ctx)
{
	enter(ARG(ctx, 0), ARG(ctx, 1), ARG(ctx, 2), DIR_RECV, 0);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_writev")
int enter_writev(struct trace_event_raw_sys_enter *ctx)
{
	enter(ARG(ctx, 0), ARG(ctx, 1), ARG(ctx, 2), DIR_SEND, 0);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_recvfrom")
int enter_recvfrom(struct trace_event_raw_sys_enter *ctx)
{
	// A peek does not consume: the bytes come again with the next read.
	if (ARG(ctx, 3) & MSG_PEEK)
		return 0;
	enter(ARG(ctx, 0), ARG(ctx, 1), 0, DIR_RECV, 0);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_sendto")
int enter_sendto(struct trace_event_raw_sys_enter *ctx)
{
	enter(ARG(ctx, 0), ARG(ctx, 1), 0, DIR_SEND, 0);
	return 0;
}

// msg_enter reads the iovec array of a user_msghdr.
static __always_inline void msg_enter(struct trace_event_raw_sys_enter *ctx, __u8 dir)
{
	struct user_msghdr m;
	if (bpf_probe_read_user(&m, sizeof(m), (void *)ARG(ctx, 1)))
		return;
	if (!m.msg_iovlen)
		return;
	enter(ARG(ctx, 0), (__u64)m.msg_iov, m.msg_iovlen, dir, 0);
}

SEC("tracepoint/syscalls/sys_enter_recvmsg")
int enter_recvmsg(struct trace_event_raw_sys_enter *ctx)
{
	if (ARG(ctx, 2) & MSG_PEEK)
		return 0;
	msg_enter(ctx, DIR_RECV);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_sendmsg")
int enter_sendmsg(struct trace_event_raw_sys_enter *ctx)
{
	msg_enter(ctx, DIR_SEND);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_sendfile64")
int enter_sendfile64(struct trace_event_raw_sys_enter *ctx)
{
	enter(ARG(ctx, 0), 0, 0, DIR_SEND, 1);
	return 0;
}

// One exit program serves every call: the stash says what it was.
SEC("tracepoint/syscalls/sys_exit_read")
int exit_call(struct trace_event_raw_sys_exit *ctx)
{
	leave(ctx->ret);
	return 0;
}

// inet_sock_set_state: a socket on a broker port opening (its offsets start
// at the first byte) or closing (user space ends the connection once the
// bytes counted have arrived).
SEC("tracepoint/sock/inet_sock_set_state")
int on_sock_state(struct trace_event_raw_inet_sock_set_state *ctx)
{
	if (ctx->protocol != IPPROTO_TCP)
		return 0;
	if (!port_wanted(ctx->sport) && !port_wanted(ctx->dport))
		return 0;
	__u64 sk = (__u64)ctx->skaddr;
	int ns = ctx->newstate;
	if (ns == TCP_SYN_SENT || ns == TCP_SYN_RECV) {
		struct sock_state fresh = {.gen = bpf_ktime_get_ns(), .flags = FLAG_HANDSHAKE};
		bpf_map_update_elem(&socks, &sk, &fresh, BPF_ANY);
		return 0;
	}
	if (ns != TCP_CLOSE)
		return 0;
	struct sock_state *st = bpf_map_lookup_elem(&socks, &sk);
	if (!st)
		return 0;
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(CNT_DROPS);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts = bpf_ktime_get_ns();
	e->sk = sk;
	e->gen = st->gen;
	e->offset = st->off[DIR_SEND];
	e->aux = st->off[DIR_RECV];
	e->kind = KIND_CLOSE;
	e->lport = ctx->sport;
	e->rport = ctx->dport;
	e->family = ctx->family;
	int os = ctx->oldstate;
	if (os == 1 /* ESTABLISHED */ || os == 8 /* CLOSE_WAIT */ || os == TCP_SYN_SENT || os == TCP_SYN_RECV)
		e->flags = FLAG_RESET;
	bpf_ringbuf_submit(e, wake_flags());
	count(CNT_EVENTS);
	return 0;
}

// --- TLS library probes (uprobes; x86-64 register conventions) ---

// tls_emit reports n bytes of plaintext a TLS library call moved on sk in
// direction dir, read from buf, as the socket's next bytes.
static __always_inline void tls_emit(__u64 sk, __u8 dir, __u64 buf, __u64 n)
{
	int sd = side((struct sock *)sk);
	if (sd < 0 || is_muted(sk))
		return;
	struct sock_state *st = mark_tls(sk);
	if (!st)
		return;
	if (n > 0xffffffff)
		n = 0xffffffff;
	__u32 flags = sd | (st->flags & FLAG_HANDSHAKE) | FLAG_TLS;
	__u64 offset = __sync_fetch_and_add(&st->off[dir & 1], n);
	__u64 budget = n < cfg_snap ? n : cfg_snap;
	emit(sk, offset, pack(n, budget), buf, flags << 8 | (dir & 1));
	count(CNT_TLS_CALLS);
}

// ssl_enter stashes an OpenSSL call for its return probe.
static __always_inline void ssl_enter(__u64 ssl, __u64 buf, __u64 exlen, __u8 dir)
{
	if (!process_wanted())
		return;
	__u64 id = bpf_get_current_pid_tgid();
	struct tls_call *c = bpf_map_lookup_elem(&ssl_calls, &id);
	if (c) {
		// Inside another probed call (SSL_connect -> SSL_do_handshake):
		// the outer one returns last.
		c->depth++;
		if (c->dir == DIR_NONE && dir != DIR_NONE) {
			c->dir = dir;
			c->buf = buf;
			c->exlen = exlen;
		}
		return;
	}
	struct tls_call fresh = {.ssl = ssl, .buf = buf, .exlen = exlen, .dir = dir, .depth = 1};
	bpf_map_update_elem(&ssl_calls, &id, &fresh, BPF_ANY);
}

// SSL_write(SSL *ssl, const void *buf, int num)
SEC("uprobe")
int ssl_write_enter(struct pt_regs *ctx)
{
	ssl_enter(ctx->di, ctx->si, 0, DIR_SEND);
	return 0;
}

// SSL_read(SSL *ssl, void *buf, int num)
SEC("uprobe")
int ssl_read_enter(struct pt_regs *ctx)
{
	ssl_enter(ctx->di, ctx->si, 0, DIR_RECV);
	return 0;
}

// SSL_write_ex(SSL *s, const void *buf, size_t num, size_t *written)
SEC("uprobe")
int ssl_write_ex_enter(struct pt_regs *ctx)
{
	ssl_enter(ctx->di, ctx->si, ctx->cx, DIR_SEND);
	return 0;
}

// SSL_read_ex(SSL *ssl, void *buf, size_t num, size_t *readbytes)
SEC("uprobe")
int ssl_read_ex_enter(struct pt_regs *ctx)
{
	ssl_enter(ctx->di, ctx->si, ctx->cx, DIR_RECV);
	return 0;
}

// SSL_do_handshake, SSL_connect, SSL_accept (SSL *ssl): the system calls
// inside mark the socket TLS before its first byte.
SEC("uprobe")
int ssl_handshake_enter(struct pt_regs *ctx)
{
	ssl_enter(ctx->di, 0, 0, DIR_NONE);
	return 0;
}

// One return probe serves every OpenSSL function: the stash says which.
SEC("uretprobe")
int ssl_ret(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct tls_call *cp = bpf_map_lookup_elem(&ssl_calls, &id);
	if (!cp)
		return 0;
	if (--cp->depth > 0)
		return 0;
	struct tls_call c = *cp;
	bpf_map_delete_elem(&ssl_calls, &id);
	if (c.dir == DIR_NONE)
		return 0;
	int ret = (int)ctx->ax; // every probed function returns an int: RAX's upper half is not part of it
	__u64 n = 0;
	if (c.exlen) {
		// _ex: 1 on success, the count in *written / *readbytes.
		if (ret != 1 || bpf_probe_read_user(&n, sizeof(n), (void *)c.exlen))
			return 0;
	} else if (ret > 0) {
		n = ret;
	}
	if (n == 0)
		return 0;
	if (!c.sk) {
		// Served from the library's buffers: the SSL object's socket.
		struct ssl_key k = {.ssl = c.ssl, .tgid = id >> 32};
		struct ssl_sock *s = bpf_map_lookup_elem(&ssl_socks, &k);
		if (!s) {
			count(CNT_TLS_NO_SOCK);
			return 0;
		}
		c.sk = s->sk;
		c.kafka = s->kafka;
	}
	if (c.kafka)
		tls_emit(c.sk, c.dir, c.buf, n);
	return 0;
}

// go_sock returns the socket under a *tls.Conn, or 0. tls.Conn begins
// with conn net.Conn (an interface: type word, data pointer); a
// *net.TCPConn's data begins with fd *netFD; a netFD begins with pfd
// poll.FD, whose Sysfd follows its 16-byte fdMutex. These layouts have
// held since Go 1.0; a conn that is not a *net.TCPConn (a wrapper) gives
// a wrong fd, which sock_of rejects unless it names a TCP socket, and
// then side() unless that socket is on a broker port.
static __always_inline __u64 go_sock(__u64 conn)
{
	__u64 data = 0, nfd = 0;
	__s64 fd = -1;
	if (bpf_probe_read_user(&data, sizeof(data), (void *)(conn + 8)) || !data)
		return 0;
	if (bpf_probe_read_user(&nfd, sizeof(nfd), (void *)data) || !nfd)
		return 0;
	if (bpf_probe_read_user(&fd, sizeof(fd), (void *)(nfd + 16)) || fd < 0)
		return 0;
	return (__u64)sock_of(fd);
}

// go_enter stashes a crypto/tls call for the probes on its RET
// instructions (Go moves goroutine stacks, which uretprobes do not
// survive). Under Go's register ABI (1.17+) the receiver is in RAX, the
// buffer's pointer in RBX, the goroutine in R14.
static __always_inline void go_enter(struct pt_regs *ctx, __u8 dir)
{
	if (!process_wanted())
		return;
	__u64 sk = go_sock(ctx->ax);
	if (!sk || side((struct sock *)sk) < 0 || is_muted(sk))
		return;
	mark_tls(sk);
	if (dir == DIR_NONE)
		return;
	__u64 g = ctx->r14;
	struct go_key k = {.g = g, .tgid = bpf_get_current_pid_tgid() >> 32};
	struct tls_call c = {.ssl = ctx->ax, .buf = ctx->bx, .sk = sk, .dir = dir, .kafka = 1};
	// A buffer on the goroutine's stack moves with it: keep its distance
	// from the top (g.stack.hi, at g+8; lo at g+0).
	__u64 stk[2] = {};
	if (bpf_probe_read_user(stk, sizeof(stk), (void *)g) == 0 && c.buf >= stk[0] && c.buf < stk[1])
		c.stk = stk[1] - c.buf + 1;
	bpf_map_update_elem(&go_calls, &k, &c, BPF_ANY);
}

// crypto/tls.(*Conn).Write(b []byte) (int, error)
SEC("uprobe")
int go_write_enter(struct pt_regs *ctx)
{
	go_enter(ctx, DIR_SEND);
	return 0;
}

// crypto/tls.(*Conn).Read(b []byte) (int, error)
SEC("uprobe")
int go_read_enter(struct pt_regs *ctx)
{
	go_enter(ctx, DIR_RECV);
	return 0;
}

// crypto/tls.(*Conn).handshakeContext: the handshake's bytes go straight
// to the socket; mark it TLS before the first.
SEC("uprobe")
int go_handshake_enter(struct pt_regs *ctx)
{
	go_enter(ctx, DIR_NONE);
	return 0;
}

// At each RET of Write and Read: the byte count is in RAX.
SEC("uprobe")
int go_ret(struct pt_regs *ctx)
{
	__u64 g = ctx->r14;
	struct go_key k = {.g = g, .tgid = bpf_get_current_pid_tgid() >> 32};
	struct tls_call *cp = bpf_map_lookup_elem(&go_calls, &k);
	if (!cp)
		return 0;
	struct tls_call c = *cp;
	bpf_map_delete_elem(&go_calls, &k);
	long n = ctx->ax;
	if (n <= 0)
		return 0;
	if (c.stk) {
		__u64 stk[2] = {};
		if (bpf_probe_read_user(stk, sizeof(stk), (void *)g))
			return 0;
		c.buf = stk[1] - (c.stk - 1);
	}
	tls_emit(c.sk, c.dir, c.buf, n);
	return 0;
}
